"""``FPArray``: a numpy-like array whose values stay in one number format.

Every operator rounds its exact result once to the array's format through the
elementwise operations of ``ops`` and the accumulation of ``accumulate``.
"""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np

from .accumulate import matmul as _mm, sum as _sum
from ..backend.fpu import ieee_entry
from ..core.intake import holds
from ..core.formats import Format, FormatLike, get_format
from ..core.types import Overflow, RngLike, Values
from .ops import InFormat, abs as _abs, add, div, make_ctx, mul, neg, operand_values, promote_formats, sqrt, sub

__all__ = ["FPArray", "array", "scalar"]


def _opts_kwargs(o):
    return dict(rounding=o["rounding"], overflow=o["overflow"], ftz=o["ftz"], daz=o["daz"],
                rng=o["rng"])


class FPArray(InFormat):
    """A numpy array whose values are in one number format, with arithmetic in that format.

    Make one with ``ff.array(values, "fp16", rounding=...)`` or ``ff.scalar``.
    Every operator rounds its exact result once to the array's format
    (``+ - * /``, ``@``, ``**2``, unary ``-``, ``abs``), with the array's
    rounding options.  Python and numpy numbers and arrays mix in as operands
    and are cast to the format first.  Two FPArrays of different formats are
    first cast (exactly) to ``promote_formats(f1, f2)`` (bf16 with fp16 gives
    fp32, as in PyTorch); the options of the left operand are used.

    ``x @ y`` accumulates in fp32 (or in the format itself when it is wider)
    and rounds the result to the array's format, as a GPU GEMM with fp32
    compute does; ``x.sum()`` rounds every partial sum to the format (use
    ``x.sum(acc_fmt="fp32")``, ``order="kahan"`` ... to change that).

    Attributes: ``.values`` (float64 copy), ``.codes`` (bit patterns),
    ``.fmt`` (the ``Format``), ``.shape``, ``.ndim``, ``.size``.
    Comparisons return numpy booleans.

    >>> import floatfmt as ff
    >>> ff.scalar(1.0, "fp16") + 0.0001          # the update vanishes
    FPArray(1.0, fmt='fp16')
    >>> x = ff.array([0.1, 0.2, 0.3], "bf16")
    >>> x
    FPArray([0.10009765625, 0.2001953125, 0.30078125], fmt='bf16')
    >>> (x * 10).values.tolist(), x.codes.tolist()
    ([1.0, 2.0, 3.0], [15821, 15949, 16026])
    """

    __array_ufunc__ = None  # numpy defers to our reflected operators
    __hash__ = None  # type: ignore[assignment]  # unhashable, like ndarray (mypy rejects the None idiom)

    def __init__(self, values: Values, fmt: FormatLike, rounding: str = "nearest_even",
                 overflow: Overflow = None, ftz: bool = False, daz: bool = False,
                 rng: RngLike = None) -> None:
        ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng)
        if isinstance(values, FPArray):
            values = values._v
        v, _ = operand_values(values, ctx, "input")
        self._v = np.array(v, np.float64)
        self._v.setflags(write=False)
        self.fmt = ctx.fmt
        self._o = {"rounding": ctx.mode, "overflow": overflow, "ftz": bool(ftz),
                   "daz": bool(daz), "rng": ctx.rng}

    @classmethod
    def _wrap(cls, values, fmt: Format, opts: dict) -> "FPArray":
        """An FPArray around values known to be in ``fmt`` (our own results or views of
        them: not copied)."""
        obj = cls.__new__(cls)
        obj._v = np.asarray(values, np.float64)
        obj._v.setflags(write=False)
        obj.fmt = fmt
        obj._o = dict(opts)
        return obj

    # --- views ---------------------------------------------------------------------------
    @property
    def values(self) -> np.ndarray:
        """The values as a float64 array (a copy)."""
        return self._v.copy()

    @property
    def codes(self):
        """The bit patterns (see ``ff.encode``)."""
        from ..core.codec import values_to_codes
        c = values_to_codes(self._v, self.fmt)
        return int(c) if self.ndim == 0 else c

    @property
    def shape(self):
        return self._v.shape

    @property
    def ndim(self):
        return self._v.ndim

    @property
    def size(self):
        return self._v.size

    @property
    def T(self):
        return FPArray._wrap(self._v.T, self.fmt, self._o)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d FPArray")
        return len(self._v)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d FPArray")
        for i in range(len(self._v)):
            yield self[i]

    def __getitem__(self, idx):
        return FPArray._wrap(self._v[idx], self.fmt, self._o)

    def __setitem__(self, idx, value):
        v = self._cast_other(value)
        new = self._v.copy()
        new[idx] = v
        new.setflags(write=False)
        self._v = new

    def __array__(self, dtype=None, copy=None):
        return self._v.astype(dtype) if dtype is not None else self._v.copy()

    def __float__(self):
        return float(self._v)

    def __int__(self):
        return int(self._v)

    def __bool__(self):
        return bool(self._v)

    def tolist(self):
        return self._v.tolist()

    def astype(self, fmt, **options) -> "FPArray":
        """The same values cast to another format (options default to this array's)."""
        opts = {**self._o, **options}
        return FPArray(self._v, fmt, **_opts_kwargs(opts))

    def __repr__(self):
        opts = "" if self._o["rounding"] == "nearest_even" else f", rounding={self._o['rounding']!r}"
        if self.ndim == 0:
            body = repr(float(self._v))
        else:
            body = np.array2string(self._v, separator=", ", prefix="FPArray(", threshold=200,
                                   formatter={"float_kind": lambda v: repr(float(v))})
        return f"FPArray({body}, fmt={self.fmt.name!r}{opts})"

    def explain(self, **kwargs):
        """Bit-level explanation of the values (delegates to ``floatfmt.teach.explain.entry``)."""
        if importlib.util.find_spec("floatfmt.teach.explain.entry") is None:
            raise NotImplementedError("FPArray.explain needs floatfmt.teach.explain.entry, which this "
                                      "installation does not have yet")
        mod = importlib.import_module("floatfmt.teach.explain.entry")
        v = float(self._v) if self.ndim == 0 else self._v
        return mod.explain(v, self.fmt, **kwargs)

    # --- arithmetic ----------------------------------------------------------------------
    def _cast_other(self, other):
        ctx = make_ctx(self.fmt, **_opts_kwargs(self._o))
        v, _ = operand_values(other, ctx)
        return v

    def _binary(self, other, fn, reflected=False):
        if isinstance(other, FPArray):
            fmt = promote_formats(self.fmt, other.fmt)
            x = self if self.fmt == fmt else self._v  # FPArrays of fmt skip the cast
            y = other if other.fmt == fmt else other._v
        elif isinstance(other, (int, float, complex, np.generic, np.ndarray, list, tuple)) \
                or hasattr(other, "as_integer_ratio"):
            fmt, x, y = self.fmt, self, other
        else:
            return NotImplemented
        if reflected:
            x, y = y, x
        r = fn(x, y, fmt, **_opts_kwargs(self._o))
        return FPArray._wrap(r, fmt, self._o)

    def __add__(self, o):
        return self._binary(o, add)

    def __radd__(self, o):
        return self._binary(o, add, True)

    def __sub__(self, o):
        return self._binary(o, sub)

    def __rsub__(self, o):
        return self._binary(o, sub, True)

    def __mul__(self, o):
        return self._binary(o, mul)

    def __rmul__(self, o):
        return self._binary(o, mul, True)

    def __truediv__(self, o):
        return self._binary(o, div)

    def __rtruediv__(self, o):
        return self._binary(o, div, True)

    def __matmul__(self, o):
        return self._binary(o, _matmul_op)

    def __rmatmul__(self, o):
        return self._binary(o, _matmul_op, True)

    def __pow__(self, n):
        if isinstance(n, (int, float, np.integer, np.floating)):
            if n == 2:
                return FPArray._wrap(mul(self._v, self._v, self.fmt, **_opts_kwargs(self._o)),
                                     self.fmt, self._o)
            if n == 1:
                return FPArray._wrap(self._v, self.fmt, self._o)
            if n == 0.5:
                return FPArray._wrap(sqrt(self._v, self.fmt, **_opts_kwargs(self._o)),
                                     self.fmt, self._o)
            if n == -1:
                return FPArray._wrap(div(1.0, self._v, self.fmt, **_opts_kwargs(self._o)),
                                     self.fmt, self._o)
        raise ValueError(f"FPArray supports ** with 2, 1, 0.5 and -1 (each one correctly "
                         f"rounded operation), not {n!r}; chain * for other powers")

    def __neg__(self):
        return FPArray._wrap(neg(self._v, self.fmt, **_opts_kwargs(self._o)), self.fmt, self._o)

    def __pos__(self):
        return FPArray._wrap(self._v, self.fmt, self._o)

    def __abs__(self):
        return FPArray._wrap(_abs(self._v, self.fmt, **_opts_kwargs(self._o)), self.fmt, self._o)

    def _cmp(self, other, op):
        y = other._v if isinstance(other, FPArray) else self._cast_other(other)
        with np.errstate(invalid="ignore"):
            r = op(self._v, y)
        return bool(r) if np.ndim(r) == 0 else r

    def __eq__(self, o):
        return self._cmp(o, np.equal)

    def __ne__(self, o):
        return self._cmp(o, np.not_equal)

    def __lt__(self, o):
        return self._cmp(o, np.less)

    def __le__(self, o):
        return self._cmp(o, np.less_equal)

    def __gt__(self, o):
        return self._cmp(o, np.greater)

    def __ge__(self, o):
        return self._cmp(o, np.greater_equal)

    # --- reductions ----------------------------------------------------------------------
    def sum(self, axis=None, acc_fmt=None, order="sequential", **kwargs) -> "FPArray":
        """Sum with ``ff.sum`` (partial sums in ``acc_fmt``, default this format); the
        result is an FPArray in ``acc_fmt``.

        >>> import floatfmt as ff
        >>> x = ff.array([1.0] + [2**-11] * 8, "fp16")
        >>> float(x.sum()), float(x.sum(acc_fmt="fp32")), float(x.sum(order="kahan"))
        (1.0, 1.00390625, 1.00390625)
        """
        opts = {**_opts_kwargs(self._o), **kwargs}
        r = _sum(self._v, self.fmt, acc_fmt=acc_fmt, order=order, axis=axis, **opts)
        out = get_format(kwargs.get("out_fmt") or acc_fmt or self.fmt)
        return FPArray._wrap(r, out, self._o)

    def matmul(self, other, **kwargs) -> "FPArray":
        """``ff.matmul(self, other, self.fmt, **kwargs)`` as an FPArray in the result's format
        (``out_fmt``, else ``acc_fmt``, else fp32)."""
        y = other._v if isinstance(other, FPArray) else other
        r = _mm(self._v, y, self.fmt, **kwargs)
        out = get_format(kwargs.get("out_fmt") or kwargs.get("acc_fmt", "fp32"))
        if kwargs.get("model") is not None and kwargs.get("out_fmt") is None:
            out = get_format(kwargs.get("acc_fmt", "fp32"))
        return FPArray._wrap(r, out, self._o)


def _matmul_op(x, y, fmt, rounding, overflow, ftz, daz, rng):
    fmt = get_format(fmt)
    acc = fmt if (fmt.kind == "float" and holds(fmt, get_format("fp32"))) else "fp32"
    return _mm(x, y, fmt, acc_fmt=acc, out_fmt=fmt, rounding=rounding, overflow=overflow,
               ftz=ftz, daz=daz, rng=rng)


@ieee_entry
def array(values: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,
          ftz: bool = False, daz: bool = False, rng: RngLike = None) -> FPArray:
    """An ``FPArray``: ``values`` cast to ``fmt`` (same options as ``ff.cast``), with
    arithmetic in ``fmt``.

    >>> array([1, 2, 3], "fp8_e4m3") / 3
    FPArray([0.34375, 0.6875, 1.0], fmt='fp8_e4m3')
    """
    return FPArray(values, fmt, rounding, overflow, ftz, daz, rng)


@ieee_entry
def scalar(value: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,
           ftz: bool = False, daz: bool = False, rng: RngLike = None) -> FPArray:
    """A 0-d ``FPArray`` holding one number cast to ``fmt``.

    >>> scalar(1.0, "fp16") + 0.0001, scalar(1.0, "fp32") + 0.0001
    (FPArray(1.0, fmt='fp16'), FPArray(1.000100016593933, fmt='fp32'))
    """
    x = FPArray(value, fmt, rounding, overflow, ftz, daz, rng)
    if x.ndim != 0:
        raise TypeError(f"scalar() takes one number, not an array of shape {x.shape}; "
                        "use array()")
    return x

