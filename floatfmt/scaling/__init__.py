"""Quantisation and scaling: ``quantize`` / ``QuantizedTensor``, per-tensor and per-channel
scales, group / 2-D tiles, OCP MX and NVFP4 blocks, P3109 blocks, integer GEMMs."""
