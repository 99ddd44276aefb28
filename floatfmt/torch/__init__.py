"""floatfmt on torch tensors: the torch layer (imports torch; ``import floatfmt`` does not).

``floatfmt.cast``, ``encode`` and ``decode`` take tensors directly (the core reaches
torch only through its array namespace, ``floatfmt.backend.namespace``).  This package adds what
needs torch itself:

* ``cast(x, fmt, ..., ste=None)``: ``floatfmt.cast`` (re-exported; tensors in, tensors
  out, straight-through gradient, ``ste="clipped"``);
* ``fake_quant(x, fmt, ...)``: per-tensor / per-channel integer and float fake
  quantisation on the tensor's device, differentiable (straight-through or clipped);
* ``emulate(model, recipe)`` / ``unemulate(model)`` / ``emulating(model, recipe)``:
  every GEMM-like op of the model (linear, matmul, addmm, einsum, attention,
  convolutions) runs forward and backward as a precision recipe on a given matrix
  unit computes it, under an autocast-like op policy; ``emulation_report(model)``
  says what ran emulated; ``matmul(a, b, recipe)`` for attention-style
  products; recipes as data (``Recipe``, ``recipes()``, ``get_recipe``: ``fp32``,
  ``tf32``, ``bf16``, ``fp16``, ``fp8_tensorwise``, ``mxfp8``, ``mxfp4``, ``nvfp4`` ...).

>>> import torch, floatfmt.torch as fft
>>> fft.cast(torch.tensor([0.1, 1000.0]), "fp8_e4m3", overflow="saturate").tolist()
[0.1015625, 448.0]

Importing it without torch raises ``floatfmt.core.optional.MissingExtraError`` (a
``ModuleNotFoundError``) that names the extra: ``pip install "floatfmt[torch]"``.
"""

from ..core.optional import optional_import

optional_import("torch", "torch", "floatfmt.torch")

from ..core.cast import cast  # noqa: E402 - after the check that torch is there
from .quant import fake_quant
from .recipe import Recipe, get_recipe, recipes
from .emulation import matmul, unscale_grads
from .interception import (delayed_scaling, emulate, emulating, emulation_report, unemulate,
                           update_scales)
from .report import EmulationReport
from .distributed import amax_all_reduce

__all__ = ["amax_all_reduce", "cast", "fake_quant", "emulate", "unemulate", "emulating", "emulation_report",
           "EmulationReport", "matmul", "Recipe", "get_recipe", "recipes", "update_scales",
           "unscale_grads", "delayed_scaling"]
