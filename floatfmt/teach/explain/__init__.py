"""``ff.explain``: the explanation of one value (``value``), of an array (``array``),
of one block of a block-scaled tensor (``block``), their HTML (``html``), and the
entry point that picks one (``entry``)."""
