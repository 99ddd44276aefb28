"""Matrix-unit (tensor-core) models: the presets as data, the fused dot-product-add
steps (T-FDPA and the AMD steps), and their tensor (device) versions."""
