"""The core layer: formats as data, the one rounding routine, exact intake of input,
``cast``, ``info``, codes (``encode`` / ``decode`` ...), packing, IEEE flags and threads."""
