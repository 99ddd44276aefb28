"""floatfmt on torch tensors: the torch layer (imports torch; ``import floatfmt`` does not).

``floatfmt.cast``, ``encode`` and ``decode`` take tensors directly (the core reaches
torch only through its array namespace, ``floatfmt.backend.namespace``).  This package adds what
needs torch itself:

* ``cast(x, fmt, ..., ste=None)``: ``floatfmt.cast`` (re-exported; tensors in, tensors
  out, straight-through gradient, ``ste="clipped"``);
* ``fake_quant(x, fmt, ...)``: per-tensor / per-channel integer and float fake
  quantisation on the tensor's device, differentiable (straight-through or clipped);
* ``emulate(model, recipe)`` / ``unemulate(model)`` / ``emulating(model, recipe)``:
  every ``nn.Linear`` runs its forward and backward GEMMs as a precision recipe on a
  given matrix unit computes them; ``matmul(a, b, recipe)`` for attention-style
  products; recipes as data (``Recipe``, ``recipes()``, ``get_recipe``: ``fp32``,
  ``tf32``, ``bf16``, ``fp16``, ``fp8_tensorwise``, ``mxfp8``, ``mxfp4``, ``nvfp4`` ...).

>>> import torch, floatfmt.torch as fft
>>> fft.cast(torch.tensor([0.1, 1000.0]), "fp8_e4m3", overflow="saturate").tolist()
[0.1015625, 448.0]
"""

from ..core.cast import cast
from .quant import fake_quant
from .recipe import Recipe, get_recipe, recipes
from .emulation import (delayed_scaling, emulate, emulating, matmul, unemulate, unscale_grads,
                      update_scales)

__all__ = ["cast", "fake_quant", "emulate", "unemulate", "emulating", "matmul", "Recipe",
           "get_recipe", "recipes", "update_scales", "unscale_grads", "delayed_scaling"]
