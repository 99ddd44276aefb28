"""floatfmt on torch tensors: the torch layer (imports torch; ``import floatfmt`` does not).

``floatfmt.cast``, ``encode`` and ``decode`` take tensors directly (the core reaches
torch only through its array namespace, ``floatfmt._xp``).  This package adds what
needs torch itself:

* ``cast(x, fmt, ..., ste=None)``: ``floatfmt.cast`` (re-exported; tensors in, tensors
  out, straight-through gradient, ``ste="clipped"``);
* ``fake_quant(x, fmt, ...)``: per-tensor / per-channel integer and float fake
  quantisation on the tensor's device, differentiable (straight-through or clipped).

>>> import torch, floatfmt.torch as fft
>>> fft.cast(torch.tensor([0.1, 1000.0]), "fp8_e4m3", overflow="saturate").tolist()
[0.1015625, 448.0]
"""

from .._cast import cast
from .quant import fake_quant

__all__ = ["cast", "fake_quant"]
