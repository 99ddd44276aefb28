"""The torch array namespace: the operations of ``NumpyNamespace`` with torch ops on the
tensor's device (torch is never imported here: the module is handed in by
``floatfmt.backend.namespace``, which takes it from ``sys.modules``)."""

from __future__ import annotations

import contextlib
import struct

import numpy as np

__all__ = ["TorchNamespace"]


class TorchNamespace:
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


    # twins-mu: the matrix units' operations (see _Numpy's block of the same name);
    # twins-ops: what the exact arithmetic (arith/limbs.py, arith/residuals.py, the rules of
    # arith/ops.py) needs beyond the rounding routine (the same operations as _Numpy's block)
    @staticmethod
    def quiet():
        """No IEEE exception is raised or warned about by torch: a null context."""
        return contextlib.nullcontext()

    @property
    def float64(self):
        return self.t.float64

    def matmul(self, a, b):
        return self.t.matmul(a, b)

    def einsum(self, spec, *ops):
        return self.t.einsum(spec, *ops)

    def swapaxes(self, x, a, b):
        return x.transpose(a, b)

    def moveaxis(self, x, a, b):
        return x.movedim(a, b)

    @staticmethod
    def clamp_min(x, lo):
        return x.clamp(min=lo)

    def empty(self, shape, like):
        return self.t.empty(tuple(shape), dtype=self.t.float64, device=like.device)

    def operand(self, v, like):
        """A tensor as it is; numbers and lists beside tensors as float64 tensors on like's
        device."""
        t = self.t
        return v if isinstance(v, t.Tensor) else t.as_tensor(v, dtype=t.float64,
                                                             device=like.device)

    def values(self, v):
        return v.detach().to(self.t.float64)

    def concatenate(self, xs, axis=0):
        return self.t.cat(list(xs), axis)

    @staticmethod
    def repeat(x, n: int, axis: int):
        return x.repeat_interleave(n, dim=axis)

    @staticmethod
    def narrow(x, axis: int, n: int):
        return x.narrow(axis, 0, n)

    @staticmethod
    def all(mask) -> bool:
        return bool(mask.all())

    def frexp(self, x):
        m, e = self.t.frexp(x)
        return m, e.to(self.t.int64)

    def nextafter(self, x, toward: float):
        return self.t.nextafter(x, self.const(toward, x))

    def sign(self, x):
        return self.t.sign(x)

    def sqrt(self, x):
        return self.t.sqrt(x)

    def zeros_like(self, x):
        return self.t.zeros_like(x)

    def ones_like(self, x):
        return self.t.ones_like(x)

    def full_like(self, x, v):
        return self.t.full_like(x, v)

    def broadcast_to(self, x, shape):
        return self.t.broadcast_to(x, shape)

    def broadcast(self, *xs):
        return self.t.broadcast_tensors(*xs)

    def stack(self, xs, axis=0):
        return self.t.stack(list(xs), axis)

    def toint(self, x):
        return x.to(self.t.int64)

    def tou8(self, x):
        return x.to(self.t.uint8)

    def is_int64(self, x) -> bool:
        return x.dtype == self.t.int64

    def where_int(self, c, a, b):
        return self.t.where(c, a, b)

    def zeros(self, shape, like, dtype: str = "float64"):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return self.t.zeros(shape, dtype=getattr(self.t, dtype), device=like.device)

    def arange(self, n: int, like):
        return self.t.arange(n, device=like.device)

    @staticmethod
    def detach(x):
        return x.detach()

    def take0(self, L, idx):
        return self.t.gather(L, 0, idx[None])[0]

    @staticmethod
    def scatter_add0(L, idx, vals):
        return L.scatter_add_(0, idx, vals)

    @staticmethod
    def cumsum0(x):
        return x.cumsum(0)

    # twins-acc: what the accumulation orders (``floatfmt.arith.accumulate``) need
    def broadcast_shapes(self, *shapes) -> tuple:
        return tuple(self.t.broadcast_shapes(*shapes))

    def to_float64(self, x):
        """x as a float64 tensor (one already float64 as it is)."""
        return x if x.dtype == self.t.float64 else x.to(self.t.float64)


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

    def zeros_as(self, shape, like):
        """Zeros of ``like``'s dtype on its device."""
        return self.t.zeros(tuple(shape), dtype=like.dtype, device=like.device)

    def contiguous(self, a):
        return a.contiguous()

    @staticmethod
    def size(a) -> int:
        return int(a.numel())

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
