"""The numpy array namespace (float64 arrays, int64 bit views): the operations that the
rules written over ``xp`` use, as numpy spells them (see ``floatfmt.backend.namespace``)."""

from __future__ import annotations

import numpy as np

__all__ = ["NumpyNamespace"]


class NumpyNamespace:
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

    # twins-mu: what the matrix units (arith/matrixunit) need beyond the rounding routine:
    # construction, reductions, layout; the same names and meaning on _Torch
    float64 = np.float64

    matmul = staticmethod(np.matmul)
    einsum = staticmethod(np.einsum)
    swapaxes = staticmethod(np.swapaxes)
    moveaxis = staticmethod(np.moveaxis)
    broadcast_to = staticmethod(np.broadcast_to)

    @staticmethod
    def clamp_min(x, lo):
        return np.maximum(x, lo)

    @staticmethod
    def empty(shape, like=None):
        return np.empty(shape)

    @staticmethod
    def operand(v, like=None):
        """An operand as it is (numpy functions take lists and numbers)."""
        return v

    @staticmethod
    def values(v):
        """A float64 array of v's values (a detached copy where that is needed)."""
        return np.asarray(v, np.float64)

    @staticmethod
    def concatenate(xs, axis=0):
        return np.concatenate(xs, axis)

    @staticmethod
    def repeat(x, n: int, axis: int):
        return np.repeat(x, n, axis=axis)

    @staticmethod
    def all(mask) -> bool:
        return bool(mask.all())

    # twins-ops: what the exact arithmetic (arith/limbs.py, arith/residuals.py, the rules of
    # arith/ops.py) needs beyond the rounding routine, so that it runs on numpy too

    @staticmethod
    def const(v: float, like):
        """v as a float64 scalar (a broadcast operand)."""
        return np.float64(v)

    @staticmethod
    def quiet():
        """A context in which IEEE exceptions (overflow, invalid, ...) are silent."""
        return np.errstate(all="ignore")

    @staticmethod
    def frexp(x):
        """(mantissa in [1/2, 1) or 0, int64 exponent) of a float64 array."""
        m, e = np.frexp(x)
        return m, e.astype(np.int64)

    @staticmethod
    def nextafter(x, toward: float):
        """The next float64 after each element of x toward the scalar ``toward``."""
        return np.nextafter(x, toward)

    sign = staticmethod(np.sign)
    sqrt = staticmethod(np.sqrt)
    zeros_like = staticmethod(np.zeros_like)
    ones_like = staticmethod(np.ones_like)
    full_like = staticmethod(np.full_like)  # keeps like's dtype, as torch.full_like

    @staticmethod
    def broadcast(*xs):
        """The arrays broadcast to one shape (read-only views)."""
        return np.broadcast_arrays(*xs)

    @staticmethod
    def stack(xs, axis=0):
        return np.stack(xs, axis)

    @staticmethod
    def toint(x):
        """As int64 (floats truncated toward zero)."""
        return np.asarray(x).astype(np.int64)

    @staticmethod
    def tou8(x):
        return np.asarray(x).astype(np.uint8)

    @staticmethod
    def is_int64(x) -> bool:
        return np.asarray(x).dtype == np.int64

    @staticmethod
    def where_int(c, a, b):
        """``where`` of Python ints or int arrays: an int64 result."""
        return np.where(c, a, b).astype(np.int64, copy=False)

    @staticmethod
    def zeros(shape, like=None, dtype: str = "float64"):
        return np.zeros(shape, dtype)

    @staticmethod
    def arange(n: int, like):
        return np.arange(n, dtype=np.int64)

    @staticmethod
    def detach(x):
        return x

    @staticmethod
    def take0(L, idx):
        """``L[idx[j], j]`` for each column j of the 2-d L (idx: one int64 row index per column)."""
        return np.take_along_axis(L, idx[None], 0)[0]

    @staticmethod
    def scatter_add0(L, idx, vals):
        """In place: ``L[idx[i, j], j] += vals[i, j]`` for every i, j (integers: exact)."""
        cols = np.broadcast_to(np.arange(L.shape[1]), idx.shape)
        np.add.at(L, (idx, cols), vals)
        return L

    @staticmethod
    def cumsum0(x):
        return np.cumsum(x, 0)

    # twins-acc: what the accumulation orders (``floatfmt.arith.accumulate``) need
    @staticmethod
    def broadcast_shapes(*shapes) -> tuple:
        return tuple(np.broadcast_shapes(*shapes))

    @staticmethod
    def to_float64(x):
        """x as a float64 array (numpy: ``np.asarray``)."""
        return np.asarray(x, np.float64)



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
    def narrow(a, axis: int, n: int):
        """The first n entries of a along ``axis`` (negative axes count from the end; a
        view)."""
        return a[(slice(None),) * (axis % a.ndim) + (slice(0, n),)]

    @staticmethod
    def zeros_as(shape, like):
        """Zeros of ``like``'s dtype."""
        return np.zeros(shape, like.dtype)

    @staticmethod
    def contiguous(a):
        return np.ascontiguousarray(a)

    @staticmethod
    def size(a) -> int:
        return int(a.size)

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
