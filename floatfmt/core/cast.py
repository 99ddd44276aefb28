"""``cast``: the value of any input in any format, correctly rounded once."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend.namespace import NUMPY, is_tensor, namespace
from ..backend.dispatch import check_tensors, compiling, run_eager
from ..backend.fpu import flushing, ieee
from .intake import Exact, holds, to_exact
from .labeled import is_labeled, relabel, values_of
from .formats import FormatLike, get_format
from .types import Overflow, RngLike, Values
from .round_f32 import cast_float32
from .decision import Decision, decide
from .rounding import STOCHASTIC, make_rng, resolve_mode, resolve_overflow, round_values

__all__ = ["cast", "round_exact", "rounding_decision", "tensor_exact"]


def _widens_float32(dtype: Any) -> bool:
    """Whether ``cast(..., dtype=dtype)`` may take the float32 route: no dtype, or one
    that holds every float32 exactly (float32 or float64, numpy or torch; widening the
    float32 result to it is exact, so the bits are those of the general route)."""
    if dtype is None:
        return True
    if is_tensor_dtype(dtype):
        return str(dtype) in ("torch.float32", "torch.float64")
    try:
        return np.dtype(dtype) in (np.float32, np.float64)
    except TypeError:
        return False  # not a dtype: the general route reports it


def is_tensor_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` is a ``torch.dtype`` (checked without importing torch)."""
    return type(dtype).__module__.startswith("torch")


def _as_dtype(r: Any, dtype: Any) -> Any:
    """The float32 result ``r`` (array or tensor) in ``dtype`` (see ``_widens_float32``)."""
    if is_tensor(r):
        if r.dtype is dtype:  # (torch dtypes are singletons)
            return r
        xp = namespace(r)
        return xp.astype(r, xp.dtype_of(dtype))
    return r.astype(dtype)


def round_exact(ex, fmt, rounding="nearest_even", overflow=None, ftz=False, daz=False,
                rng=None, sr_bits=None, sr_random=None):
    """Round an ``Exact`` record to ``fmt``; returns a float64 array (shape kept).

    The shared entry used by ``cast``, ``encode`` and the arithmetic layer: it
    validates the options, turns ``daz`` into the input format's subnormal
    threshold and calls the one rounding routine.
    """
    fmt, values, mode, policy, daz_below, rng = _prepare(ex, fmt, rounding, overflow, daz, rng,
                                                          sr_bits)
    return round_values(values, fmt, mode, policy, ftz=bool(ftz), daz_below=daz_below,
                        rng=rng, sr_bits=sr_bits, sticky=ex.sticky, resid=ex.resid,
                        sr_random=sr_random)


def _prepare(ex, fmt, rounding, overflow, daz, rng, sr_bits):
    """The options checked and the values made ready for ``round_values`` (shared by
    ``round_exact`` and ``rounding_decision``)."""
    fmt = get_format(fmt)
    mode = resolve_mode(rounding)
    policy = resolve_overflow(overflow, fmt)
    if mode in STOCHASTIC and not is_tensor(ex.values):
        rng = make_rng(rng)
    elif mode not in STOCHASTIC and sr_bits is not None:
        raise ValueError("sr_bits applies to the stochastic roundings only "
                         f"({', '.join(repr(m) for m in STOCHASTIC)})")
    daz_below = ex.src.smallest_normal if (daz and ex.src.subnormals) else None
    values = ex.values
    xp = namespace(values)
    if mode in STOCHASTIC and xp is not NUMPY:
        rng = xp.generator(rng, values)
    if policy == "wrap":
        # Reduce magnitudes modulo 2**bits first (exact: same sign, same fraction),
        # so that huge inputs wrap like their low bits.
        # Inf and NaN are left alone (Inf saturates, NaN stays NaN).
        with np.errstate(invalid="ignore"):
            values = xp.where(xp.isfinite(values),
                              xp.copysign(xp.fmod(xp.abs(values), float(1 << fmt.bits)), values),
                              values)
    return fmt, values, mode, policy, daz_below, rng


def tensor_exact(x) -> Exact:
    """The ``Exact`` record of a torch tensor: its values as a float64 tensor on its own
    device (exact; see ``_xp``), no sticky part, and its source format."""
    check_tensors("floatfmt.cast", [x])
    xp = namespace(x)
    values, float_dtype = xp.intake(x)
    src = get_format(float_dtype) if float_dtype is not None else get_format("fp64")
    return Exact(values, None, False, src, float_dtype)


def _clip_mask(x, fmt, xp):
    """Where the clipped straight-through estimator passes the gradient: inputs inside
    the format's finite range [lo, max] (lo = -max, an integer format's min, 0 for
    unsigned floats, the smallest value of E8M0)."""
    if fmt.kind == "int":
        lo = float(fmt.min)
    elif fmt.signed:
        lo = -fmt.max
    else:
        lo = 0.0 if fmt.zero else fmt.smallest_normal
    return (x >= lo) & (x <= fmt.max)


def _tensor_result(x, ex, r, fmt, dtype, ste):
    """The result tensor of ``cast``: dtype chosen as for numpy, gradient attached."""
    xp = namespace(r)
    if dtype is not None:
        r = xp.astype(r, xp.dtype_of(dtype))
    elif ex.float_dtype is not None and ex.float_dtype != xp.t.float64 and holds(ex.src, fmt):
        r = xp.astype(r, ex.float_dtype)
    if ste not in (None, "identity", "clipped"):
        raise ValueError(f"unknown ste {ste!r}. Valid: 'identity' (the default), 'clipped'")
    if x.requires_grad:
        mask = _clip_mask(ex.values, fmt, xp) if ste == "clipped" else None
        r = xp.straight_through(x, r, mask)
    return r


def rounding_decision(x, fmt, rounding="nearest_even", overflow=None, ftz=False, daz=False,
                      rng=None, *, sr_bits=None, stored=None) -> Decision:
    """How ``cast(x, fmt, ...)`` rounds the scalar ``x``: a ``rounding.Decision``.

    The input goes through the same intake and preparation as ``cast`` (exact
    value, daz threshold of the input's own format, wrap reduction) and then to
    ``rounding.decide``, so ``rounding_decision(...).value == cast(...)`` for the
    same arguments, a stochastic draw with the same ``rng`` included.
    ``stored``: the value an earlier cast stored (see ``decide``).  Used by
    ``explain``.

    >>> d = rounding_decision(-127.6, "int8")
    >>> d.lower, d.upper, d.chosen, d.nearer, d.value
    (Fraction(-128, 1), Fraction(-127, 1), 'lower', 'lower', -128.0)
    """
    fmt = get_format(fmt)
    ex = to_exact(x, wrap_bits=fmt.bits if overflow == "wrap" else None)
    if not ex.scalar:
        raise TypeError(f"rounding_decision takes one number, not {type(x).__name__}")
    fmt, values, mode, policy, daz_below, rng = _prepare(ex, fmt, rounding, overflow, daz, rng,
                                                          sr_bits)
    sticky = 0 if ex.sticky is None else int(ex.sticky)
    resid = None if ex.resid is None else int(ex.resid)
    return decide(float(values), fmt, mode, policy, ftz=bool(ftz), daz_below=daz_below, rng=rng,
                  sr_bits=sr_bits, sticky=sticky, resid=resid, stored=stored)


def refuse_unused_rng(rounding, rng, sr_random=None) -> None:
    """ValueError when ``rng`` or ``sr_random`` is given with a rounding that is not
    stochastic (it would be silently ignored)."""
    if (rng is not None or sr_random is not None) and resolve_mode(rounding) not in STOCHASTIC:
        what = "rng" if rng is not None else "sr_random"
        raise ValueError(f"{what}= drives stochastic rounding only, and rounding={rounding!r} would ignore "
                         f"it: pass rounding='stochastic' (or one of "
                         f"{', '.join(repr(m) for m in STOCHASTIC[1:])}), or leave {what}= out")


# size: the docstring states the whole casting rule (inputs, modes, dtypes, torch, specials)
def cast(x: Values, fmt: FormatLike, rounding: str = "nearest_even", overflow: Overflow = None,
         ftz: bool = False, daz: bool = False, rng: RngLike = None, *, sr_bits: int | None = None,
         dtype: Any = None, ste: str | None = None, sr_random: Any = None) -> Values:
    """Round ``x`` to the format ``fmt`` and return its value.

    The result is the exact input value rounded once to ``fmt`` under
    ``rounding`` (``nearest_even``, ``nearest_away``, ``toward_zero``, ``up``,
    ``down``, ``odd``, ``stochastic``, or the aliases ``rne rna rtz rup rdn rto
    sr``).  ``x`` may be a float, an int of any size, a ``Fraction``, a
    ``Decimal``, a numeric string (``"0.1"`` is the decimal 0.1, ``"0x1.8p-3"``
    the hex float 0.1875; ``"1e400"`` and ``"0x1p2000"`` are finite numbers past
    float64), a list or tuple (nested, mixing any of these: each element is
    taken as it would be on its own), or a numpy / ml_dtypes / torch array of
    any dtype (int64 and uint64 included); nothing is rounded on the way in.

    ``overflow``: ``"inf"``, ``"saturate"``, ``"nan"``, ``"wrap"`` (integers),
    P3109's ``"propagate"`` / ``"satnone"``, or None for the format's own.  ``ftz``
    flushes subnormal results to signed zero; ``daz`` zeroes inputs subnormal in
    their own format.  ``rng`` and ``sr_bits`` drive the stochastic modes (per
    block, the same on any number of threads: ``floatfmt.core.threads``); ``sr_random``
    gives their N-bit random integers instead (``rounding.round_values``).  Any of
    ``rng`` / ``sr_random`` with a rounding that is not stochastic is a ValueError
    (it would be ignored; ``sr_bits`` likewise).

    Scalars give a Python float; arrays keep their shape, in the input's float
    dtype when it holds every value of ``fmt`` exactly, else float64
    (``dtype=`` overrides).  A pandas Series / DataFrame gives the same kind of
    object with the same index (name, columns); pandas is not a dependency.

    torch tensors (``import floatfmt`` itself never imports torch): the result
    is a tensor on the input's device, computed there with torch ops by the
    same rounding routine (no copy to the host).  Its dtype follows the rule
    above with torch dtypes: float64 in gives float64; float32, float16,
    bfloat16 or a float8 dtype in gives that dtype when it holds every value of
    ``fmt`` (and Inf/NaN), else float64.  Integer and bool tensors (values up to
    2**53) give float64.  ``rng`` is then a ``torch.Generator`` on the tensor's
    device, an int seed (a new Generator there) or None (torch's default
    generator of the device).  A tensor that requires grad gives a result with
    a straight-through gradient: ``ste=None`` / ``"identity"`` passes the
    gradient unchanged, ``ste="clipped"`` passes it where the input lies in the
    format's finite range (``-max <= x <= max``; ``min..max`` for integers;
    from 0, or E8M0's smallest value, for unsigned floats) and gives 0 elsewhere
    (saturated, overflowed, clipped, or non-finite inputs).

    Values a format lacks: NaN stays NaN (also for fp6 / fp4 / integers, which
    have no NaN code: ``cast`` returns NaN, ``encode`` raises ValueError);
    formats without -0 (fnuz, integers, fp8_e5m3fnu) give +0; E8M0 (unsigned powers of two,
    no zero) gives NaN for 0, negatives and NaN, and 2**-127 for positive values
    below it, as ml_dtypes does (fp8_e5m3fnu: NaN for negatives).  Stochastic rounding moves away from zero with
    probability |x - trunc_q(x)| / q (53 random bits; ``sr_bits=N`` uses N bits,
    probability floor(p * 2**N) / 2**N, as hardware does).

    >>> cast(0.1, "bf16")
    0.10009765625
    >>> cast(70000, "fp16"), cast(70000, "bf16")
    (inf, 70144.0)
    >>> cast(464, "fp8_e4m3"), cast(465, "fp8_e4m3"), cast(1e6, "e4m3", overflow="saturate")
    (448.0, nan, 448.0)
    >>> cast(1.0 + 2**-8, "bf16", rounding="up")
    1.0078125
    >>> cast(0.0, "e8m0"), cast(3.0, "e8m0"), cast(1e-50, "e8m0") == 2.0**-127
    (nan, 4.0, True)
    >>> float(cast([0.5, 2**60 + 2**52 + 1], "bf16")[1]) == 2**60 + 2**53  # the int is not rounded first
    True
    >>> cast("0x1.00000000000018p0", "fp64", "toward_zero") == 1 + 2**-52
    True
    """
    if flushing():  # a thread that flushes subnormals: IEEE for the call (backend.fpu)
        with ieee():
            return cast(x, fmt, rounding, overflow, ftz, daz, rng, sr_bits=sr_bits, dtype=dtype,
                        ste=ste, sr_random=sr_random)
    if compiling():  # torch.compile: run eagerly (floatfmt.backend.dispatch)
        return run_eager(cast, x, fmt, rounding, overflow, ftz, daz, rng, sr_bits=sr_bits,
                         dtype=dtype, ste=ste, sr_random=sr_random)
    fmt = get_format(fmt)
    refuse_unused_rng(rounding, rng, sr_random)
    if is_labeled(x):  # a pandas Series / DataFrame: same values rule, labels kept
        return relabel(x, cast(values_of(x), fmt, rounding, overflow, ftz, daz, rng, sr_bits=sr_bits,
                               dtype=dtype, ste=ste, sr_random=sr_random))
    if ste is None and sr_random is None and _widens_float32(dtype):  # float32 in: round_f32
        r = cast_float32(x, fmt, rounding, overflow, ftz, daz, rng, sr_bits)
        if r is not None:
            return r if dtype is None else _as_dtype(r, dtype)
    if is_tensor(x):
        ex = tensor_exact(x)
        r = round_exact(ex, fmt, rounding, overflow, ftz, daz, rng, sr_bits, sr_random)
        return _tensor_result(x, ex, r, fmt, dtype, ste)
    if ste is not None:
        raise TypeError("ste= applies to torch tensors only (it sets their gradient)")
    ex = to_exact(x, wrap_bits=fmt.bits if overflow == "wrap" else None)
    r = round_exact(ex, fmt, rounding, overflow, ftz, daz, rng, sr_bits, sr_random)
    if ex.scalar and dtype is None:
        return float(r)
    if dtype is not None:
        return r.astype(dtype)
    if ex.float_dtype is not None and ex.float_dtype != np.float64 and holds(ex.src, fmt):
        return r.astype(ex.float_dtype)
    return r
