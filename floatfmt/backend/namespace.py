"""Array namespaces: the few array operations the rounding routine needs, for numpy
arrays and for torch tensors.

The rounding routine (``rounding.py``) is written once against a namespace
object ``xp``; ``namespace(x)`` returns the one for ``x``.  numpy is always
there; torch is optional and never imported here: a tensor can only exist when
the user has imported torch already, so the torch namespace takes the module
from ``sys.modules`` (``import floatfmt`` never imports torch).

Every operation is exact (bit views, powers of two built from exponent bits,
comparisons, selections, IEEE rounding to integer), so the same code gives the
same bits on numpy, torch CPU and torch CUDA.  Scalars passed to ``where`` and
friends are Python floats; the torch namespace keeps float64 results (torch
would otherwise make float32 from two Python scalars).
"""

from __future__ import annotations

import struct
import sys

import numpy as np

__all__ = ["is_tensor", "namespace", "NUMPY"]


def is_tensor(x) -> bool:
    """True for a ``torch.Tensor`` (checked without importing torch)."""
    if not type(x).__module__.startswith("torch"):
        return False
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


class _Numpy:
    """The numpy namespace (float64 arrays, int64 bit views)."""

    name = "numpy"

    def __init__(self):
        for op in ("abs", "trunc", "floor", "ceil", "rint", "signbit", "isnan", "isinf",
                   "isfinite", "copysign", "where", "maximum", "fmod", "ldexp"):
            setattr(self, op, getattr(np, op))

    @staticmethod
    def bits(x):
        """The int64 bit patterns of a float64 array (a view)."""
        return x.view(np.int64)

    @staticmethod
    def floats(i):
        """The float64 values of int64 bit patterns (a view)."""
        return i.view(np.float64)

    @staticmethod
    def clip(x, lo, hi):
        return np.clip(x, lo, hi)

    @staticmethod
    def copy(x):
        return x.copy()

    @staticmethod
    def pow2(e):
        """2.0**e exactly, for an integer array e (subnormal results included)."""
        return np.ldexp(1.0, e)

    @staticmethod
    def signed(v: float, like):
        """The scalar v with the sign bit of each element of ``like``."""
        return np.copysign(v, like)

    @staticmethod
    def falses(like):
        return np.zeros(like.shape, bool)

    @staticmethod
    def full(like, v, dtype=bool):
        return np.full(like.shape, v, dtype)

    @staticmethod
    def tofloat(mask):
        return mask.astype(np.float64)

    @staticmethod
    def any(mask) -> bool:
        return bool(mask.any())

    @staticmethod
    def some(mask) -> bool:
        """False only when no element of ``mask`` is True: a cheap reduction on the host,
        so that the caller skips work no element needs (see ``_Torch.some``)."""
        return bool(mask.any())

    @staticmethod
    def uniform(rng, like):
        """Uniform float64 in [0, 1) (53 random bits), one per element of ``like``."""
        return rng.random(like.shape)

    @staticmethod
    def randint(rng, n: int, like):
        """Uniform integers 0..n-1 as float64, one per element of ``like``."""
        return rng.integers(0, n, size=like.shape).astype(np.float64)


    # twins-scaling: array plumbing of the quantisation rules (written once over xp)
    @staticmethod
    def asfloat(a, like=None):
        """a (an array, a number or a list) as a float64 array (no copy when it is one)."""
        return np.asarray(a, np.float64)

    @staticmethod
    def astype(x, dtype):
        return x.astype(dtype, copy=False)

    @staticmethod
    def dtype_of(dtype):
        return np.dtype(dtype)

    @staticmethod
    def repeat(a, n: int, axis: int):
        return np.repeat(a, n, axis=axis)

    @staticmethod
    def narrow(a, axis: int, n: int):
        """The first n entries of a along ``axis`` (a view)."""
        return a[(slice(None),) * axis + (slice(0, n),)]

    @staticmethod
    def moveaxis(a, src: int, dst: int):
        return np.moveaxis(a, src, dst)

    @staticmethod
    def zeros(shape, like):
        """Zeros of ``like``'s dtype."""
        return np.zeros(shape, like.dtype)

    @staticmethod
    def concat(arrays, axis: int):
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def contiguous(a):
        return np.ascontiguousarray(a)

    @staticmethod
    def size(a) -> int:
        return int(a.size)

    @staticmethod
    def broadcast(a, b):
        return np.broadcast_arrays(a, b)

    @staticmethod
    def amax(a, axis=None, keepdims: bool = False):
        return np.amax(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def amin(a, axis=None, keepdims: bool = False):
        return np.amin(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def sort(a, axis: int = -1):
        return np.sort(a, axis=axis, kind="stable")

    @staticmethod
    def all(mask) -> bool:
        return bool(np.all(mask))

    @staticmethod
    def asint(a, like=None):
        """a as an int64 array."""
        return np.asarray(a).astype(np.int64, copy=False)

    @staticmethod
    def dtype_kind(a) -> str:
        """numpy's kind letter of a's dtype: 'f', 'i', 'u', 'b' or 'c'."""
        return a.dtype.kind

    @staticmethod
    def minmax(a):
        return int(a.min()), int(a.max())

    @staticmethod
    def intake(x):
        """(float64 values of x, x's float dtype or None), exact: float16/32/64 arrays
        widen, bool and integer ones up to 2**53 in magnitude; else TypeError."""
        a = np.asarray(x)
        if a.dtype.kind == "f" and a.dtype.itemsize in (2, 4, 8):
            return a.astype(np.float64), a.dtype
        if a.dtype.kind in "biu":
            if a.dtype.kind != "b" and a.size and (int(a.max()) > 2 ** 53 or int(a.min()) < -2 ** 53):
                raise ValueError("integer values past 2**53 are not held exactly by float64")
            return a.astype(np.float64), None
        raise TypeError(f"unsupported array dtype {a.dtype} for the namespace intake")

    @staticmethod
    def generator(rng, x):
        """A ``numpy.random.Generator`` (given, from an int seed, or fresh for None)."""
        return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


NUMPY = _Numpy()


class _Torch:
    """The torch namespace: the same operations with torch ops on the tensor's device."""

    name = "torch"

    def __init__(self, torch):
        self.t = torch
        self._consts: dict = {}
        for op in ("abs", "trunc", "floor", "ceil", "signbit", "isnan", "isinf",
                   "maximum", "fmod"):
            setattr(self, op, getattr(torch, op))

    def isfinite(self, x):
        """Finite elements: |x| < Inf (two kernels; torch.isfinite takes four)."""
        return x.abs() < float("inf")

    def const(self, v: float, like):
        """v as a 0-d float64 tensor on like's device, made once per (value, device): a
        broadcast operand that costs no kernel (a fresh one is a fill kernel per call)."""
        key = (struct.pack("<d", float(v)), str(like.device))  # bits: -NaN is not NaN
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = self.t.full((), float(v), dtype=self.t.float64,
                                                device=like.device)
        return c

    def rint(self, x):
        return self.t.round(x)  # round half to even, as numpy.rint

    def bits(self, x):
        return x.view(self.t.int64)

    def floats(self, i):
        return i.view(self.t.float64)

    def clip(self, x, lo, hi):
        return self.t.clamp(x, lo, hi)  # NaN stays NaN, as numpy.clip

    def copy(self, x):
        return x.clone()

    def copysign(self, a, b):
        """|a| with the sign of b, float64 (a bool a counts as 0.0 / 1.0, promoted inside
        the one kernel)."""
        t = self.t
        if not isinstance(a, t.Tensor):
            a = self.const(a, b)
        return t.copysign(a, b)

    def where(self, c, a, b):
        t = self.t
        if not isinstance(a, t.Tensor) and not isinstance(b, t.Tensor):
            a = t.full(c.shape, a, dtype=t.float64, device=c.device)
        return t.where(c, a, b)

    def pow2(self, e):
        """2.0**e exactly for an int64 tensor e in [-1074, 1023] (e below that range gives
        2**-1074, above it 2**1023), from the bit pattern: with u = e + 1022, the
        exponent-field part max(u, 0) << 52 (2**e less 2**-1022 for a normal power, 0 for a
        subnormal one) plus the mantissa part (1 << 52) >> max(-u, 0) (2**-1022 for a normal
        power, the subnormal's own bit else); seven kernels, no selection."""
        t = self.t
        u = e + 1022
        field = u.clamp(0, 2045) << 52
        mant = 1 << (u.clamp(-52, 0) + 52)
        return (field + mant).view(t.float64)

    def pow2_normal(self, e):
        """2.0**e exactly for an int64 tensor e known to lie in [-1022, 1023] (a normal
        power; other e give wrong values): two kernels."""
        return ((e + 1023) << 52).view(self.t.float64)

    def ldexp(self, x, k):
        """x * 2**k rounded once, for int64 k with |k| <= 2044 (an int or a tensor):
        two multiplies by normal powers of two 2**floor(k/2) and 2**ceil(k/2); the
        first never leaves the double range when x and the result lie in it, so
        only the second can round (a subnormal or overflowing result)."""
        t = self.t
        if not isinstance(k, t.Tensor):
            k = t.full(x.shape, int(k), dtype=t.int64, device=x.device)
        k1 = t.div(k, 2, rounding_mode="floor")
        return x * self.pow2(k1) * self.pow2(k - k1)

    def signed(self, v: float, like):
        return self.t.copysign(self.const(v, like), like)

    def falses(self, like):
        return self.t.zeros(like.shape, dtype=self.t.bool, device=like.device)

    def full(self, like, v, dtype=bool):
        t = self.t
        return t.full(like.shape, v, dtype=t.bool if dtype is bool else t.float64,
                      device=like.device)

    def tofloat(self, mask):
        return mask.to(self.t.float64)

    def any(self, mask) -> bool:
        return bool(mask.any())

    @staticmethod
    def some(mask) -> bool:
        """Always True, without looking: reading a reduction back (``bool(t.any())``)
        stalls a GPU until its queue drains, which costs more than the masked pass it
        could skip; the caller then does that pass (a no-op where nothing is masked)."""
        return True

    def uniform(self, rng, like):
        t = self.t
        return t.rand(like.shape, generator=rng, dtype=t.float64, device=like.device)

    def randint(self, rng, n: int, like):
        t = self.t
        return t.randint(0, n, like.shape, generator=rng, dtype=t.int64,
                         device=like.device).to(t.float64)


    def generator(self, rng, x):
        """A ``torch.Generator`` for stochastic rounding of x: a Generator on x's device,
        an int seed (a fresh Generator on that device), or None (torch's default
        generator of the device, seeded by ``torch.manual_seed``)."""
        t = self.t
        if rng is None:
            return None
        if isinstance(rng, t.Generator):
            if t.device(rng.device).type != x.device.type:
                raise ValueError(f"the torch.Generator is on {rng.device} but the tensor is on "
                                 f"{x.device}; give a Generator on {x.device} or an int seed")
            return rng
        if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
            return t.Generator(device=x.device).manual_seed(int(rng))
        raise TypeError(f"rng for a torch tensor must be a torch.Generator, an int seed or None, "
                        f"not {type(rng).__name__}")


    # ------------------------------------------------------------ tensors in and out
    def intake(self, x):
        """(float64 tensor of x's exact values on x's device, x's float dtype or None).

        Float dtypes (float64/32/16, bfloat16, the float8 types) convert exactly;
        bool and integer tensors convert when every value is at most 2**53 in
        magnitude (else ValueError: float64 cannot hold them); complex and other
        dtypes raise TypeError.  A float8 NaN becomes the float64 NaN that ml_dtypes
        (the numpy path's intake) gives for the same code: the quiet NaN 0x7FF8... with
        the code's sign, negative for the fnuz types' only NaN (code 0x80)."""
        t = self.t
        if x.is_complex():
            raise TypeError(f"complex tensors are not supported (got {x.dtype}); "
                            "give a real floating-point, integer or bool tensor")
        if x.is_floating_point():
            v = x.detach().to(t.float64)
            if x.element_size() == 1:  # float8: torch keeps payloads and gives fnuz's NaN +
                nan = (self.const(-np.nan, v) if "fnuz" in str(x.dtype)
                       else t.copysign(self.const(np.nan, v), v))
                v = t.where(t.isnan(v), nan, v)
            return v, x.dtype
        if x.dtype == t.bool or x.dtype in (t.int8, t.uint8, t.int16, t.int32):
            return x.detach().to(t.float64), None
        if x.dtype == t.int64:
            if bool(((x > 2 ** 53) | (x < -2 ** 53)).any()):
                raise ValueError("int64 tensor values past 2**53 cannot be taken exactly on a "
                                 "tensor device; give a float tensor or a numpy int64 array")
            return x.detach().to(t.float64), None
        raise TypeError(f"unsupported tensor dtype {x.dtype}; accepted: floating-point "
                        "(float64, float32, float16, bfloat16, float8_*), integer or bool")

    def dtype_of(self, dtype):
        """A torch dtype for ``cast(..., dtype=)`` (a torch dtype or a name such as
        ``"float32"``)."""
        t = self.t
        if isinstance(dtype, t.dtype):
            return dtype
        d = getattr(t, str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype, None)
        if not isinstance(d, t.dtype):
            raise TypeError(f"dtype {dtype!r} is not a torch dtype")
        return d

    def astype(self, x, dtype):
        return x.to(dtype)

    def code_dtype(self, bits: int):
        """The unsigned torch dtype holding codes of ``bits`` bits."""
        t = self.t
        for n, d in ((8, "uint8"), (16, "uint16"), (32, "uint32"), (64, "uint64")):
            if bits <= n:
                return getattr(t, d)
        raise AssertionError(bits)

    def int64(self, codes):
        """Integer codes as int64 (unsigned torch dtypes support few ops)."""
        t = self.t
        if codes.is_floating_point() or codes.is_complex() or codes.dtype == t.bool:
            raise TypeError(f"codes must be an integer tensor, not {codes.dtype}")
        return codes.to(t.int64)

    def minmax(self, a):
        return int(a.min()), int(a.max())

    def straight_through(self, x, value, mask=None):
        """``value`` in the forward pass, with the gradient of x passed through
        unchanged (``mask`` None) or only where ``mask`` is True (zero elsewhere)."""
        if self._ste is None:
            self._ste = _make_ste(self.t)
        return self._ste.apply(x, value, mask)

    _ste = None


    # twins-scaling: array plumbing of the quantisation rules (written once over xp)
    def asfloat(self, a, like=None):
        """a (a tensor, a number or a list) as a float64 tensor on ``like``'s device."""
        t = self.t
        if isinstance(a, t.Tensor):
            return a.to(t.float64)
        return t.as_tensor(a, dtype=t.float64, device=None if like is None else like.device)

    def repeat(self, a, n: int, axis: int):
        return a.repeat_interleave(n, dim=axis)

    def narrow(self, a, axis: int, n: int):
        return a.narrow(axis, 0, n)

    def moveaxis(self, a, src: int, dst: int):
        return a.movedim(src, dst)

    def zeros(self, shape, like):
        return self.t.zeros(tuple(shape), dtype=like.dtype, device=like.device)

    def concat(self, arrays, axis: int):
        return self.t.cat(list(arrays), dim=axis)

    def contiguous(self, a):
        return a.contiguous()

    @staticmethod
    def size(a) -> int:
        return int(a.numel())

    def broadcast(self, a, b):
        return self.t.broadcast_tensors(a, b)

    def amax(self, a, axis=None, keepdims: bool = False):
        if axis is None:
            r = a.amax()
            return r.reshape((1,) * a.ndim) if keepdims else r
        return self.t.amax(a, dim=axis, keepdim=keepdims)

    def amin(self, a, axis=None, keepdims: bool = False):
        if axis is None:
            r = a.amin()
            return r.reshape((1,) * a.ndim) if keepdims else r
        return self.t.amin(a, dim=axis, keepdim=keepdims)

    def sort(self, a, axis: int = -1):
        return self.t.sort(a, dim=axis, stable=True).values

    def all(self, mask) -> bool:
        return bool(mask.all())

    def asint(self, a, like=None):
        t = self.t
        if isinstance(a, t.Tensor):
            return a.to(t.int64)
        return t.as_tensor(np.asarray(a).astype(np.int64), device=None if like is None
                           else like.device)

    def dtype_kind(self, a) -> str:
        t = self.t
        if a.is_complex():
            return "c"
        if a.is_floating_point():
            return "f"
        if a.dtype == t.bool:
            return "b"
        return "u" if a.dtype in (t.uint8, getattr(t, "uint16", None), getattr(t, "uint32", None),
                                  getattr(t, "uint64", None)) else "i"


def _make_ste(torch):
    class StraightThrough(torch.autograd.Function):
        """Forward: a value computed elsewhere; backward: the incoming gradient, masked."""

        @staticmethod
        def forward(ctx, x, value, mask):
            ctx.mask = mask
            ctx.x_dtype = x.dtype
            return value

        @staticmethod
        def backward(ctx, g):
            if ctx.mask is not None:
                g = torch.where(ctx.mask, g, torch.zeros((), dtype=g.dtype, device=g.device))
            return g.to(ctx.x_dtype), None, None

    return StraightThrough


_TORCH = None


def namespace(x):
    """The namespace for an array: the torch one for tensors, else numpy."""
    global _TORCH
    if is_tensor(x):
        if _TORCH is None:
            _TORCH = _Torch(sys.modules["torch"])
        return _TORCH
    return NUMPY
