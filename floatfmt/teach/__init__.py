"""The teaching layer: explanations (``explain/``), comparison tables, figures, the tour,
the explorer page and widget, quantisation demos."""
