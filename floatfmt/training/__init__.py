"""Mixed-precision training: loss scaling, delayed FP8 scaling, block-scaled GEMM
recipes, MX training GEMMs and a small training loop."""
