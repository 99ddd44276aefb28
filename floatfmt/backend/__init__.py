"""Array backends: the namespace the rounding routine is written over (NumPy or torch)
and the dispatch rule that brings tensors to the kernels.  The lowest layer: it
imports nothing else of floatfmt, and it is the only place outside ``torch/`` and
``gpu/`` that names torch."""
