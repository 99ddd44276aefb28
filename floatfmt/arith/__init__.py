"""Arithmetic in a format: error-free transformations, elementwise ops, ``FPArray``,
sums / dots / matmuls with a chosen accumulator, and the matrix units (``matrixunit/``)."""
