"""The numpy kernels of the elementwise arithmetic of ``floatfmt.arith.ops``: the
same rule as the one written over the array namespace there (``ops.add_rule`` ...),
computed faster on numpy arrays.

``floatfmt.arith.ops`` chooses between the two in one place (``ops._kernel``): numpy
arrays, Python numbers, ``FPArray`` and CPU tensors (viewed as numpy arrays by
``floatfmt.backend.dispatch``) come here; tensors computed on their device take the
rule.  tests/test_ops_fast.py proves both give the same bits on numpy arrays.

What makes these faster than the rule on numpy:

* operands already in the format are not cast again (a bit test per chunk,
  ``_in_format``; ``InFormat`` / ``FPArray`` operands skip even that);
* large arrays are processed in cache-sized chunks, on threads (``_run``,
  ``_run_fast``, ``floatfmt.core.threads``), and a chunk whose exponent bounds prove
  the float64 result exact (``add`` / ``sub`` / ``mul`` / ``fma`` of values in the
  format) is rounded from one in-place float64 operation, with no error-free
  transformation at all (``_fast_add`` ...);
* otherwise the exact result comes from ``floatfmt.arith.eft`` (float64 error-free
  transformations classifying only the inexact elements, exact ``Fraction`` slow
  paths for the rare elements near the ends of the float64 range).
"""

# size: the elementwise operations share one context, the operand cast and the chunk drivers
# (fast path, general path, and their blocks on threads); FPArray already lives in fparray
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from . import eft
from ..core import flags as fpflags
from ..core.cast import round_exact
from ..core.intake import to_exact
from ..core.formats import Format, FormatLike, get_format
from ..core.types import Overflow, RngLike, Values
from ..core.rounding import STOCHASTIC, make_rng, resolve_mode, resolve_overflow, round_values
from ..core import threads
from ..core.threads import limit_threads, run_blocks

__all__ = ["add", "sub", "mul", "div", "fma", "sqrt", "neg", "abs", "minimum", "maximum",
           "InFormat", "make_ctx", "operand_values", "check_invalid", "zero_signs"]

# ---------------------------------------------------------------------------------------------
@dataclass
class _Ctx:
    """Resolved options of one call."""

    fmt: Format
    mode: str
    policy: str
    ftz: bool
    daz: bool
    rng: object
    sr_bits: int | None
    rounding: str
    overflow: object

    @property
    def fine(self) -> bool:
        """Whether exact results must carry their remainder (``resid``), not only its class:
        stochastic rounding needs it (see ``floatfmt.arith.eft.to_sticky``)."""
        return self.mode in STOCHASTIC

    def round(self, t, cls=None, out=None):
        """Round exact values t; ``cls`` is a uint8 remainder class or an int64 resid."""
        resid = None
        if cls is not None and np.asarray(cls).dtype == np.int64:
            cls, resid = None, cls
        return round_values(t, self.fmt, self.mode, self.policy, ftz=self.ftz, rng=self.rng,
                            sr_bits=self.sr_bits, sticky=cls, resid=resid, out=out)


def make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits=None) -> _Ctx:
    fmt = get_format(fmt)
    mode = resolve_mode(rounding)
    policy = resolve_overflow(overflow, fmt)
    if mode in STOCHASTIC:
        rng = make_rng(rng)  # one generator for every operand and the result
    elif sr_bits is not None:
        raise ValueError("sr_bits applies to the stochastic roundings only")
    return _Ctx(fmt, mode, policy, bool(ftz), bool(daz), rng, sr_bits, rounding, overflow)


_ABS = np.uint64(0x7FFFFFFFFFFFFFFF)


def _in_format(v: np.ndarray, fmt: Format) -> bool:
    """Cheap test: is every element of the float64 array ``v`` a finite value of ``fmt``
    (so that casting it would change nothing)?  False means "cast it".  Works on the
    bit patterns: no significand bits past the format's, magnitude at most max, and
    values below the normal range on the subnormal grid; chunk by chunk, so that an
    array that is not in the format (the usual input of a cast) costs one chunk."""
    if fmt.kind != "float" or fmt.mbits >= 52 or not fmt.signed or not fmt.zero:
        return False
    flat = v.reshape(-1)  # (a copy only when v is not contiguous)
    return all(_chunk_in_format(flat[i:i + _FAST_CHUNK], fmt)
               for i in range(0, flat.size, _FAST_CHUNK))


def _chunk_in_format(v: np.ndarray, fmt: Format) -> bool:
    """``_in_format`` of one chunk (a nonempty flat array)."""
    u = v.view(np.uint64)
    m = np.bitwise_and(u, _ABS)
    if m.max() > np.float64(fmt.max).view(np.uint64):
        return False  # past the range, Inf or NaN
    one = np.uint64(1)
    tiny = (m - one) < (np.float64(fmt.smallest_normal).view(np.uint64) - one)  # 0 < |v| < normal
    low = np.uint64((1 << (52 - fmt.mbits)) - 1)
    if np.bitwise_and(m, low, out=m).any():
        return False  # more significand bits than the format has
    if tiny.any():
        sub = v[tiny] / fmt.smallest_subnormal  # exact: a power of two
        if not (sub == np.trunc(sub)).all():
            return False
    if not fmt.negative_zero and np.signbit(v[v == 0]).any():
        return False
    return True


class InFormat:
    """Values known to lie in one format: a float64 array ``_v`` and its ``fmt``.

    The arithmetic here takes such operands without casting them again; ``FPArray``
    (``floatfmt.arith.fparray``) is the public kind, and the chunk driver wraps slices in a
    plain ``InFormat``.
    """

    def __init__(self, values, fmt: Format):
        self._v = values
        self.fmt = fmt

    @property
    def ndim(self):
        return self._v.ndim


def operand_values(x, ctx: _Ctx, what="operand"):
    """(float64 values of x cast to ctx.fmt, was-scalar)."""
    if isinstance(x, InFormat):
        if x.fmt == ctx.fmt and not ctx.daz:
            return x._v, x.ndim == 0
        x = x._v
    if (isinstance(x, np.ndarray) and x.dtype == np.float64 and x.ndim > 0 and not ctx.ftz
            and not ctx.daz and _in_format(x, ctx.fmt)):
        return x, False
    ex = to_exact(x)
    v = round_exact(ex, ctx.fmt, ctx.rounding, ctx.overflow, ctx.ftz, False, ctx.rng, ctx.sr_bits)
    v = np.asarray(v, np.float64)
    fmt = ctx.fmt
    if ctx.daz and fmt.kind == "float" and fmt.subnormals:
        tiny = (np.abs(v) < fmt.smallest_normal) & (v != 0)
        if tiny.any():
            v = np.where(tiny, np.copysign(0.0, v), v)
    if not fmt.has_nan or fmt.kind == "int":
        if np.isnan(v).any():
            raise ValueError(f"{fmt.name} has no NaN, but an {what} is NaN")
    return v, ex.scalar


def _finish(r, scalar):
    return float(r) if scalar else r


def check_invalid(t, ctx: _Ctx, opname, *operands):
    """ValueError when a format without NaN gets an invalid result; inside ``ff.flags()``
    also counts ``invalid`` where t is NaN and none of ``operands`` is."""
    fpflags.note_invalid(t, *operands)
    if (not ctx.fmt.has_nan or ctx.fmt.kind == "int") and np.isnan(t).any():
        raise ValueError(
            f"{opname} in {ctx.fmt.name} has an invalid result (such as 0/0, Inf - Inf, 0 * Inf "
            f"or sqrt of a negative number) and {ctx.fmt.name} has no NaN to hold it")


def zero_signs(t, cls, x, y, mode):
    """IEEE sign of exact zero sums x + y: -0 only for (-0) + (-0), or in mode 'down'
    for any exact zero except (+0) + (+0)."""
    exact_zero = t == 0
    if cls is not None:
        exact_zero &= cls == 0
    if not exact_zero.any():
        return t
    x_pz = (x == 0) & ~np.signbit(x)
    y_pz = (y == 0) & ~np.signbit(y)
    both_neg_zero = (x == 0) & (y == 0) & np.signbit(x) & np.signbit(y)
    neg = both_neg_zero if mode != "down" else ~(x_pz & y_pz)
    t = np.where(exact_zero, np.where(neg, -0.0, 0.0), t)
    return t


_OP_CHUNK = 1 << 15


def _run(impl, ctx, *args):
    """``impl(ctx, *args)`` -> (values, scalar); large float arrays of one shape (with
    scalars) are processed in slices that stay in the CPU cache."""
    shape = None
    for x in args:
        if isinstance(x, InFormat):
            x = x._v
        if isinstance(x, np.ndarray) and x.ndim > 0:
            if x.dtype.kind != "f" or x.dtype.itemsize > 8 or (shape is not None and x.shape != shape):
                shape = None
                break
            shape = x.shape
        elif not (isinstance(x, (float, np.floating)) or (isinstance(x, (int, np.integer))
                                                          and not isinstance(x, bool)
                                                          and -2 ** 53 <= x <= 2 ** 53)):
            shape = None
            break
    size = 0 if shape is None else int(np.prod(shape))
    if size <= 2 * _OP_CHUNK:
        return impl(ctx, *args)
    flat = [(x._v if isinstance(x, InFormat) else x) for x in args]
    fmts = [x.fmt if isinstance(x, InFormat) else None for x in args]
    flat = [np.ascontiguousarray(x).reshape(-1) if isinstance(x, np.ndarray) else x for x in flat]
    out = np.empty(size)

    def work(i0, j0, g):
        c = _block_ctx(ctx, g)
        for i in range(i0, j0, _OP_CHUNK):
            j = min(i + _OP_CHUNK, j0)
            part = [InFormat(x[i:j], f) if f is not None
                    else (x[i:j] if isinstance(x, np.ndarray) else x)
                    for x, f in zip(flat, fmts)]
            out[i:j] = impl(c, *part)[0]

    _blocks(ctx, size, work)
    return out.reshape(shape), False


def _block_ctx(ctx: _Ctx, g) -> _Ctx:
    """The context of one block: its own generator under stochastic rounding."""
    return ctx if g is None else replace(ctx, rng=g)


def _blocks(ctx: _Ctx, size: int, work, serial: bool = False) -> None:
    """``work(i, j, g)`` over the blocks of ``range(size)`` on the threads (see
    ``floatfmt.core.threads``; ``g`` is the block's generator under stochastic rounding), or
    on the calling thread alone (``serial``: the same blocks and generators)."""
    if serial:
        with limit_threads(1):
            return _blocks(ctx, size, work)
    rng = ctx.rng if ctx.mode in STOCHASTIC else None
    # (with chunks of 2**15 and one block per hand-over, 2 threads made ff.add bf16 slower;
    # with chunks of a block and parts of 8 blocks, measured on the 2-core machine, 2 threads
    # against 1: add bf16 / mul fp8_e4m3 of 1e6 1.11x / 1.02x, of 1e7 1.27x / 1.33x)
    run_blocks(size, work, rng if isinstance(rng, np.random.Generator) else None)


_NO_OPTS = {"rounding": "nearest_even", "overflow": None, "ftz": False, "daz": False, "rng": None}


# ---------------------------------------------------------------------------------------------
def add(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.add`` (see its docstring)."""
    ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    return _finish(*_run_fast(ctx, _add_impl, _fast_add, a, b))


def _add_impl(ctx, a, b, negate=False):
    (x, sx), (y, sy) = operand_values(a, ctx), operand_values(b, ctx)
    return _add_values(x, -y if negate else y, ctx, "sub" if negate else "add"), sx and sy


def _sub_impl(ctx, a, b):
    return _add_impl(ctx, a, b, True)


# ------------------------------------------------------------- fast path of add/sub/mul/fma
# For float64 arrays (or FPArrays) of one shape whose values are already in fmt, each
# cache-sized chunk costs a few bit-pattern reductions per operand, one or two float64
# operations and one call of round_values: the operands need no cast, and the float64 result
# is exact (no TwoSum / TwoProd, no remainder class) whenever the chunk's exponent bounds
# prove it.  A chunk whose operands are in fmt but whose result may be inexact goes through
# the exact value-level routine (_add_values, _mul_values, _fma_values); a chunk with an
# operand not in fmt goes through the general path (cast first).

def _fast_ok(fmt: Format) -> bool:
    """Formats the fast path handles: signed floats with zero and -0 whose values are
    normal float64 numbers."""
    return (fmt.kind == "float" and fmt.signed and fmt.zero and fmt.negative_zero
            and fmt.mbits < 52 and fmt.emin - fmt.mbits >= -1022 and fmt.emax < 1023)


class _Scratch:
    """Chunk-sized buffers reused across the chunks of one call."""

    def __init__(self, size):
        self.w = np.empty(size, np.uint64)
        self.f = np.empty(size, np.float64)
        self.b = np.empty(size, np.bool_)
        self.size = size


_FAST_CHUNK = 1 << 17
"""Elements of a chunk of the fast path (``_run_fast``): one block of ``floatfmt.core.threads``.
Measured on the 2-core machine (10**7 values, bf16 / fp8_e4m3 add): chunks of 2**15 cost
about 20 % more, in per-chunk Python work and in handing the GIL between threads."""

_SUB_CHUNK = 1 << 15
"""A chunk that the fast path cannot take whole (an operand off the format, or exponents
too far apart for an exact float64 result) is retried in pieces of this many elements."""

_LOCAL = threading.local()
_PROBES = 8
"""Pieces of ``_SUB_CHUNK`` elements, spread over the operands, that ``_run_fast`` tries
before it shares the blocks among threads: if one of them needs the general path or the
exact value routine (many small numpy calls, GIL-bound), the call stays on the calling
thread.  Measured on the 2-core machine: bf16 fma of 10**7 normal values, a third of
whose pieces need the value routine, took 128 ms on 1 thread and 140-180 ms on 2."""


def _scratch(size: int) -> _Scratch:
    """This thread's chunk buffers of at least ``size`` elements, made once: fresh
    buffers on every call cost page faults on every call."""
    sc = getattr(_LOCAL, "scratch", None)
    if sc is None or sc.size < size:
        sc = _LOCAL.scratch = _Scratch(max(size, _FAST_CHUNK))
    return sc


_ZEROS = (-4096, 4096)  # bounds of an all-zero chunk: |v| < 2**-4096, a multiple of 2**4096


def _format_bounds(fmt: Format) -> tuple[int, int]:
    """Bounds ``(e, g)`` (see ``_chunk_range``) that hold for every finite value of fmt."""
    return fmt.emax + 1, fmt.emin - fmt.mbits


def _chunk_range(v, fmt: Format, sc: _Scratch, check: bool, tight: bool = True):
    """Bounds ``(e, g)`` of the chunk v: every element has ``|x| < 2**e`` and is an integer
    multiple of ``2**g`` (``_ZEROS`` when v is all zeros).  None when some element is Inf,
    NaN or past max, and, with ``check``, when some element is not a value of fmt at all
    (too many significand bits, off the subnormal grid): such a chunk must be cast.
    Without ``tight``, the format's own bounds (``_format_bounds``) once the chunk is
    known to hold values of fmt only (two passes fewer: for callers whose operation is
    exact on any values of fmt)."""
    k = v.size
    w = sc.w[:k]
    np.left_shift(v.view(np.uint64), np.uint64(1), out=w)  # magnitude bits, shifted: no sign
    top = int(w.max())
    if top > int(np.float64(fmt.max).view(np.uint64)) << 1:
        return None  # past max, Inf or NaN
    if check and int(np.bitwise_or.reduce(w)) & (((1 << (52 - fmt.mbits)) - 1) << 1):
        return None  # more significand bits than fmt has
    if not tight:
        if check and not _on_subnormal_grid(v, w, fmt, sc, 0):
            return None
        return _format_bounds(fmt)
    bot, off = int(w.min()), 0
    if bot == 0:  # zeros: make them wrap round to the top, so the minimum is a nonzero one
        off = 2
        np.subtract(w, np.uint64(off), out=w)
        bot = int(w.min())
        if bot == (1 << 64) - 2:
            return _ZEROS
        bot += off
    lo = bot >> 53
    if check and lo < fmt.emin + 1023 and not _on_subnormal_grid(v, w, fmt, sc, off):
        return None
    return (top >> 53) - 1022, max(lo - 1023, fmt.emin) - fmt.mbits


def _on_subnormal_grid(v, w, fmt: Format, sc: _Scratch, off: int) -> bool:
    """Whether the elements of v below fmt's normal range lie on its subnormal grid
    2**(emin - mbits) (w: the shifted magnitude bits of v, less ``off``)."""
    small = int(np.float64(fmt.smallest_normal).view(np.uint64)) << 1
    tiny = np.flatnonzero(np.less(w, np.uint64(small - off), out=sc.b[:v.size]))
    t = v[tiny] * 2.0 ** (fmt.mbits - fmt.emin)  # exact
    return bool((t == np.trunc(t)).all())


def _fits(e, g) -> bool:
    """Whether every multiple of 2**g below 2**e in magnitude is a float64 number."""
    return e - g <= 53 and e <= 1024 and g >= -1074


def _sum_bounds(bx, by):
    return max(bx[0], by[0]) + 1, min(bx[1], by[1])


def _product_exact(bx, by, fmt: Format) -> bool:
    """Whether x * y is exact in float64 for all x, y in fmt with bounds bx, by: each product
    has at most 2 * (mbits + 1) significant bits, lies below 2**(ex + ey) and is a multiple
    of 2**(gx + gy)."""
    return (2 * (fmt.mbits + 1) <= 53 and bx[0] + by[0] <= 1024
            and bx[1] + by[1] >= -1074)


def _add_exact(fmt: Format, bx, by) -> bool:
    """Whether x + y is exact in float64 for all x, y with bounds bx, by."""
    return _fits(*_sum_bounds(bx, by))


def _fma_exact(fmt: Format, bx, by, bz) -> bool:
    """Whether x * y and then + z are exact in float64 for all x, y, z with these bounds."""
    return (_product_exact(bx, by, fmt)
            and _fits(*_sum_bounds((bx[0] + by[0], bx[1] + by[1]), bz)))


def _fast_add(ctx, sc, o, x, y, bx, by, negate=False):
    if not _add_exact(ctx.fmt, bx, by):
        o[...] = _add_values(x, -y if negate else y, ctx, "sub" if negate else "add")
        return
    t = (np.subtract if negate else np.add)(x, y, out=sc.f[:x.size])  # exact
    if ctx.mode == "down":  # numpy gives IEEE zero signs in the other modes
        t = zero_signs(t, None, x, -y if negate else y, ctx.mode)
    ctx.round(t, out=o)


def _fast_sub(ctx, sc, o, x, y, bx, by):
    _fast_add(ctx, sc, o, x, y, bx, by, True)


def _fast_mul(ctx, sc, o, x, y, bx, by):
    if not _product_exact(bx, by, ctx.fmt):
        o[...] = _mul_values(x, y, ctx)
        return
    ctx.round(np.multiply(x, y, out=sc.f[:x.size]), out=o)  # exact, IEEE zero signs


def _fast_fma(ctx, sc, o, x, y, z, bx, by, bz):
    if not _fma_exact(ctx.fmt, bx, by, bz):
        o[...] = _fma_values(x, y, z, ctx)
        return
    t = np.multiply(x, y, out=sc.f[:x.size])
    np.add(t, z, out=t)  # both steps exact
    if ctx.mode == "down":
        t = zero_signs(t, None, x * y, z, ctx.mode)
    ctx.round(t, out=o)


def _mul_exact(fmt: Format, bx, by) -> bool:
    return _product_exact(bx, by, fmt)


# the exactness rule of each fast operation, on its operands' bounds
_EXACT: dict[Callable[..., None], Callable[..., bool]] = {
    _fast_add: _add_exact, _fast_sub: _add_exact, _fast_mul: _mul_exact, _fast_fma: _fma_exact}


def _run_fast(ctx: _Ctx, impl, fast, *args):
    """``impl`` (add/sub/mul/fma) over the operands, with ``fast`` (one of the ``_fast_*``)
    on each chunk whose operands are in the format, where it applies; else ``_run``."""
    fmt = ctx.fmt
    if ctx.ftz or ctx.daz or not _fast_ok(fmt) or fpflags.active():
        return _run(impl, ctx, *args)
    ops, check = [], []
    for x in args:
        if isinstance(x, InFormat) and x.fmt == fmt:
            ops.append(x._v)
            check.append(False)
        elif isinstance(x, np.ndarray) and x.dtype == np.float64:
            ops.append(x)
            check.append(True)
        else:
            return _run(impl, ctx, *args)
    shape, size = ops[0].shape, ops[0].size
    if ops[0].ndim == 0 or size == 0 or any(x.shape != shape for x in ops):
        return _run(impl, ctx, *args)
    flat = [np.ascontiguousarray(x).reshape(-1) for x in ops]
    out = np.empty(size)
    exact = _EXACT[fast]
    # exact for any values of fmt (fp8, fp16 add / mul, ...): no per-chunk exponent bounds
    tight = not exact(fmt, *[_format_bounds(fmt)] * len(flat))
    steps = [_FAST_CHUNK]  # (shared by the blocks; the chunking changes no result)

    def chunk(c, sc, i, j) -> bool:
        """Round out[i:j]; True when it had to go to pieces of ``_SUB_CHUNK``."""
        part = [x[i:j] for x in flat]
        bounds = []
        for v, chk in zip(part, check):
            r = _chunk_range(v, fmt, sc, chk, tight)
            if r is None:
                break
            bounds.append(r)
        if len(bounds) == len(part) and exact(fmt, *bounds):
            fast(c, sc, out[i:j], *part, *bounds)
        elif j - i > _SUB_CHUNK:  # smaller chunks: a narrower exponent span, fewer casts
            for k in range(i, j, _SUB_CHUNK):
                chunk(c, sc, k, min(k + _SUB_CHUNK, j))
            return True
        elif len(bounds) < len(part):
            out[i:j] = impl(c, *part)[0]
        else:
            fast(c, sc, out[i:j], *part, *bounds)  # (the exact value-level routine)
        return False

    def all_fast(i, j) -> bool:
        sc = _scratch(j - i)
        bounds = [_chunk_range(x[i:j], fmt, sc, chk, tight) for x, chk in zip(flat, check)]
        return None not in bounds and exact(fmt, *bounds)

    serial = size >= threads.MIN_BLOCKS * threads.BLOCK and not all(
        all_fast(i, min(i + _SUB_CHUNK, size))
        for i in range(0, size, max(_SUB_CHUNK, size // _PROBES))[:_PROBES])

    def work(i0, j0, g):
        c = _block_ctx(ctx, g)
        sc = _scratch(min(j0 - i0, _FAST_CHUNK))
        i = i0
        while i < j0:
            j = min(i + steps[-1], j0)
            if chunk(c, sc, i, j):
                steps.append(_SUB_CHUNK)  # the data needs pieces: go to them directly
            i = j

    _blocks(ctx, size, work, serial)
    return out.reshape(shape), False


def _broadcast(opname, *arrays):
    """numpy broadcasting of the operands, with an error that names the operation."""
    try:
        return np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = " and ".join(str(np.shape(a)) for a in arrays)
        raise ValueError(f"{opname}: operand shapes {shapes} do not broadcast together") from None


def _add_values(x, y, ctx, opname):
    x, y = _broadcast(opname, x, y)
    t, cls = eft.exact_sum(x, y, ctx.fine)
    check_invalid(t, ctx, opname, x, y)
    if ctx.mode == "down":  # numpy already gives IEEE zero signs in the other modes
        t = zero_signs(t, cls, x, y, ctx.mode)
    return ctx.round(t, cls)


def sub(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.sub`` (see its docstring)."""
    ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    return _finish(*_run_fast(ctx, _sub_impl, _fast_sub, a, b))


def mul(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.mul`` (see its docstring)."""
    ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    return _finish(*_run_fast(ctx, _mul_impl, _fast_mul, a, b))


def _mul_impl(ctx, a, b):
    (x, sx), (y, sy) = operand_values(a, ctx), operand_values(b, ctx)
    return _mul_values(x, y, ctx), sx and sy


def _mul_values(x, y, ctx):
    x, y = _broadcast("mul", x, y)
    t, cls = eft.exact_product(x, y, eft.product_is_exact(ctx.fmt), ctx.fine)
    check_invalid(t, ctx, "mul", x, y)
    return ctx.round(t, cls)


def div(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.div`` (see its docstring)."""
    ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    return _finish(*_run(_div_impl, ctx, a, b))


def _div_impl(ctx, a, b):
    (x, sx), (y, sy) = operand_values(a, ctx), operand_values(b, ctx)
    x, y = _broadcast("div", x, y)
    t, cls = eft.exact_quotient(x, y, ctx.fine)
    check_invalid(t, ctx, "div", x, y)
    fpflags.note_division(x, y)
    return ctx.round(t, cls), sx and sy


def sqrt(a: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,
         ftz: bool = False, daz: bool = False, rng: RngLike = None, *, sr_bits: int | None = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.sqrt`` (see its docstring)."""
    ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    return _finish(*_run(_sqrt_impl, ctx, a))


def _sqrt_impl(ctx, a):
    x, sx = operand_values(a, ctx)
    t, cls = eft.exact_sqrt(x, ctx.fine, eft.resid_slack(ctx.fmt) if ctx.fine else 0)
    check_invalid(t, ctx, "sqrt", x)
    return ctx.round(t, cls), sx


def fma(a: Values, b: Values, c: Values, fmt: FormatLike, rounding: str = "nearest_even",
        overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None, *,
        sr_bits: int | None = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.fma`` (see its docstring)."""
    ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng, sr_bits)
    return _finish(*_run_fast(ctx, _fma_impl, _fast_fma, a, b, c))


def _fma_impl(ctx, a, b, c):
    (x, sx), (y, sy), (z, sz) = operand_values(a, ctx), operand_values(b, ctx), operand_values(c, ctx)
    return _fma_values(x, y, z, ctx), sx and sy and sz


def _fma_values(x, y, z, ctx):
    x, y, z = _broadcast("fma", x, y, z)
    narrow = eft.product_is_exact(ctx.fmt)
    t, cls = eft.exact_fma(x, y, z, narrow, ctx.fine)
    check_invalid(t, ctx, "fma", x, y, z)
    if (ctx.mode == "down" or not narrow) and (t == 0).any():
        # stand-in for the exact product: a signed zero where it is zero, else 1
        p = np.where((x == 0) | (y == 0), np.where(np.signbit(x) ^ np.signbit(y), -0.0, 0.0), 1.0)
        t = zero_signs(t, cls, p, z, ctx.mode)
    return ctx.round(t, cls)


def _unary_rounded(a, fmt, rounding, overflow, ftz, daz, rng, fn, name):
    ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng)
    x, sx = operand_values(a, ctx)
    t = fn(x)
    check_invalid(t, ctx, name)
    return _finish(ctx.round(t), sx)


def neg(a: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,
        ftz: bool = False, daz: bool = False, rng: RngLike = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.neg`` (see its docstring)."""
    return _unary_rounded(a, fmt, rounding, overflow, ftz, daz, rng, np.negative, "neg")


def abs(a: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,  # noqa: A001
        ftz: bool = False, daz: bool = False, rng: RngLike = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.abs`` (see its docstring)."""
    return _unary_rounded(a, fmt, rounding, overflow, ftz, daz, rng, np.abs, "abs")


def _minmax(a, b, fmt, rounding, overflow, ftz, daz, rng, is_min):
    ctx = make_ctx(fmt, rounding, overflow, ftz, daz, rng)
    (x, sx), (y, sy) = operand_values(a, ctx), operand_values(b, ctx)
    x, y = _broadcast("minimum" if is_min else "maximum", x, y)
    with np.errstate(invalid="ignore"):
        r = np.where(x < y, x, y) if is_min else np.where(x > y, x, y)
        both_zero = (x == 0) & (y == 0)
        if both_zero.any():
            sx_, sy_ = np.signbit(x), np.signbit(y)
            negz = (sx_ | sy_) if is_min else (sx_ & sy_)
            r = np.where(both_zero, np.where(negz, -0.0, 0.0), r)
        r = np.where(np.isnan(x) | np.isnan(y), np.nan, r)
    return _finish(np.array(r, np.float64), sx and sy)


def minimum(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
            overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.minimum`` (see its docstring)."""
    return _minmax(a, b, fmt, rounding, overflow, ftz, daz, rng, True)


def maximum(a: Values, b: Values, fmt: FormatLike, rounding: str = "nearest_even",
            overflow: Overflow = None, ftz: bool = False, daz: bool = False, rng: RngLike = None) -> Values:
    """The numpy kernel of ``floatfmt.arith.ops.maximum`` (see its docstring)."""
    return _minmax(a, b, fmt, rounding, overflow, ftz, daz, rng, False)
