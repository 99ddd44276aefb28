"""Array namespaces: the few array operations the rounding routine needs, for numpy
arrays and for torch tensors.

The rounding routine (``rounding.py``) is written once against a namespace
object ``xp``; ``namespace(x)`` returns the one for ``x``.  numpy is always
there; torch is optional and never imported here: a tensor can only exist when
the user has imported torch already, so the torch namespace takes the module
from ``sys.modules`` (``import floatfmt`` never imports torch).

Every operation is exact (bit views, powers of two built from exponent bits,
comparisons, selections, IEEE rounding to integer), so the same code gives the
same bits on numpy, torch CPU and torch CUDA.  The two namespaces live in
``numpy_namespace`` and ``torch_namespace``: one method of one name per operation in each,
with the same meaning.  Scalars passed to ``where`` and
friends are Python floats; the torch namespace keeps float64 results (torch
would otherwise make float32 from two Python scalars).
"""

from __future__ import annotations

import sys

from .numpy_namespace import NumpyNamespace as _Numpy
from .torch_namespace import TorchNamespace as _Torch

__all__ = ["is_tensor", "namespace", "namespace_of", "NUMPY"]


def is_tensor(x) -> bool:
    """True for a ``torch.Tensor`` (checked without importing torch)."""
    cls = type(x)
    if cls is _TENSOR_CLASS[0]:  # (the common case, asked for every array argument)
        return True
    if not cls.__module__.startswith("torch"):
        return False
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    _TENSOR_CLASS[0] = torch.Tensor
    return isinstance(x, torch.Tensor)


_TENSOR_CLASS: list = [None]


NUMPY = _Numpy()


_TORCH = None


def namespace(x):
    """The namespace for an array: the torch one for tensors, else numpy."""
    global _TORCH
    if is_tensor(x):
        if _TORCH is None:
            _TORCH = _Torch(sys.modules["torch"])
        return _TORCH
    return NUMPY


def namespace_of(*xs):
    """The namespace of the first tensor among ``xs`` (numpy when there is none; twins-acc)."""
    for x in xs:
        if is_tensor(x):
            return namespace(x)
    return NUMPY
