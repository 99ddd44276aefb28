"""IEEE 754 exception flags, counted inside a ``flags()`` block (``ff.flags``).

Nothing here rounds.  Inside a ``with ff.flags() as fl:`` block the one rounding
routine (``rounding.round_values``) reports every rounding it does to this
module (``rounding.OBSERVER``), and the flags are derived afterwards from the
input, its remainder class and the routine's own result, plus, for overflow
and tininess, the same routine applied once more to an *unbounded* variant of
the format (same precision, float64's exponent range: ``unbounded``).  The
arithmetic adds what only it can see (``note_invalid``, ``note_division``).
Outside a block the cost is one context-variable lookup per rounding call.

Flags, per element and per rounding (the rules, for a float format F with
largest finite value ``max`` and smallest normal ``tiny_limit``; ``u`` is the
exact value rounded in the same mode to F's unbounded variant):

* ``overflow``: the exact value is finite and ``|u| > max`` (IEEE 754 7.4: the
  result rounded as if the exponent range were unbounded exceeds max), whatever
  the policy then stores (Inf, NaN or max).
* ``underflow``: tiny and inexact, where tiny means ``x != 0`` and ``|u| < tiny_limit``
  (IEEE 754 7.5, tininess *after* rounding, the default of binary formats).
* ``inexact``: the stored value differs from the exact value (every overflow
  included; a value flushed by ``ftz`` included).
* ``invalid``: NaN stored for a non-NaN input or an operation with no value
  (``inf - inf``, ``0 * inf``, ``0 / 0``, ``inf / inf``, ``sqrt(-1)``: raised by the
  arithmetic); a NaN input to a format without NaN (fp6, fp4, integers); an
  infinite input to a format without Inf that stores NaN (fp8_e4m3); a negative
  value, or zero where there is none, in an unsigned float format (E8M0).
  Integer formats (IEEE 754 5.8): NaN or Inf input, or a rounded value outside
  ``[min, max]`` (then neither ``overflow`` nor ``inexact``).
  ``dot`` / ``matmul``: once per output element with a product ``0 * Inf``, and
  once per accumulation step ``Inf + (-Inf)`` (tensor-core models: not counted).
* ``divide_by_zero``: ``div`` of a finite nonzero value by zero.
* ``saturated`` (floatfmt's): a finite value stored for an input that
  overflowed (the ``saturate`` policy, or a mode that rounds toward zero) or
  for an infinite or NaN input; for integers, a clipped out-of-range value.
* ``flushed`` (floatfmt's): ``daz`` turned a nonzero input below the input
  format's smallest normal into zero, or ``ftz`` turned a nonzero subnormal
  result into zero.

Stochastic rounding cannot be repeated on the unbounded variant (the draw is
spent), so there ``overflow`` means the exact magnitude exceeds ``max`` and
tiny means the exact magnitude is below ``tiny_limit`` (nonzero).  Formats as
wide as float64 (emin <= -1022): the unbounded variant cannot go below
float64's range, so tininess is judged on float64's own grid there.

Counts add up over every rounding in the block: ``ff.sum`` in fp16 with an
fp32 accumulator reports the casts of its inputs, every accumulation step and
the final rounding.  The operands of ``ff.add`` etc. are cast to the format
first, which may itself raise flags.  Blocks nest: an inner block's events are
counted in every enclosing block too.  A block is per thread (a context variable) and
runs floatfmt's array paths on the calling thread only (``limit_threads(1)``), so that
every rounding is seen.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

import numpy as np

from .formats import Format
from .names import unknown_name
from .rounding import OBSERVER, STOCHASTIC, round_values
from .threads import limit_threads

__all__ = ["FLAGS", "ACTIONS", "FlagCounts", "flags", "rounding_flags", "unbounded",
           "note_invalid", "note_division", "note_products", "active"]

FLAGS = ("inexact", "underflow", "overflow", "invalid", "divide_by_zero", "saturated", "flushed")
ACTIONS = ("count", "raise")

_ACTIVE: ContextVar = ContextVar("floatfmt_flag_counters", default=())


class FlagCounts:
    """The flags counted in one ``flags()`` block (see the module docstring for the rules).

    Each flag is an attribute holding the number of elements that raised it
    (``fl.overflow``); ``counts()`` gives them all as a dict; ``masks`` (when
    the block was opened with ``masks=True``) is a list with one dict per
    rounding call, flag name -> boolean array shaped like that call's values.
    """

    inexact: int
    underflow: int
    overflow: int
    invalid: int
    divide_by_zero: int
    saturated: int
    flushed: int

    def __init__(self, keep_masks: bool, raise_on: tuple[str, ...]) -> None:
        for name in FLAGS:
            setattr(self, name, 0)
        self.masks: list[dict[str, np.ndarray]] = []
        self._keep_masks = keep_masks
        self._raise_on = raise_on

    def counts(self) -> dict[str, int]:
        """Every flag's count, in the order of ``FLAGS``."""
        return {name: getattr(self, name) for name in FLAGS}

    def count(self, name: str) -> int:
        """The count of one flag; ValueError for a name that is not a flag."""
        if name not in FLAGS:
            raise unknown_name("flag", name, FLAGS)
        return int(getattr(self, name))

    def __repr__(self) -> str:
        return f"FlagCounts({', '.join(f'{k}={v}' for k, v in self.counts().items())})"

    def add(self, masks: dict[str, np.ndarray]) -> None:
        """Add one rounding's (or operation's) masks to the counts."""
        for name, m in masks.items():
            n = int(np.count_nonzero(m))
            setattr(self, name, getattr(self, name) + n)
            if n and name in self._raise_on:
                raise FloatingPointError(f"{name} raised by {n} element(s) (flags(raise_on=...))")
        if self._keep_masks:
            self.masks.append({k: np.asarray(v, bool).copy() for k, v in masks.items()})


def active() -> bool:
    """Whether a ``flags()`` block is open in this context (the hot paths' one check)."""
    return bool(_ACTIVE.get())


@contextmanager
def flags(*, masks: bool = False, raise_on: tuple[str, ...] | list[str] | str = ()
          ) -> Iterator[FlagCounts]:
    """Count IEEE 754 exception flags over a block, like ``numpy.errstate``.

    ``with ff.flags() as fl:`` counts, element by element, the flags raised by
    every rounding in the block (``cast``, ``encode``, the arithmetic, the
    reductions): ``inexact``, ``underflow`` (tiny after rounding and inexact),
    ``overflow``, ``invalid``, ``divide_by_zero`` and floatfmt's ``saturated``
    and ``flushed`` (rules in ``floatfmt.core.flags``).  ``masks=True`` also keeps
    a boolean mask per flag for each rounding call (``fl.masks``).
    ``raise_on``: flag names that raise ``FloatingPointError`` as soon as a
    rounding raises them.

    >>> import floatfmt as ff
    >>> with ff.flags() as fl:
    ...     y = ff.cast([1.0, 1.1, 500.0, 2.0**-12], "fp8_e4m3")
    >>> fl.inexact, fl.overflow, fl.underflow, fl.invalid
    (3, 1, 1, 0)
    >>> with ff.flags() as fl:
    ...     q = ff.div([1.0, 0.0], [0.0, 0.0], "fp16")
    >>> fl.divide_by_zero, fl.invalid
    (1, 1)
    """
    if not isinstance(masks, bool):
        raise TypeError(f"flags(masks=...) takes True or False, not {type(masks).__name__}")
    names = (raise_on,) if isinstance(raise_on, str) else tuple(raise_on)
    for name in names:
        if name not in FLAGS:
            raise unknown_name("flag (raise_on)", name, FLAGS)
    counter = FlagCounts(masks, names)
    token = _ACTIVE.set(_ACTIVE.get() + (counter,))
    otoken = OBSERVER.set(_observe)
    try:
        # one thread: the block's state lives in this thread's context (worker threads
        # of floatfmt.core.threads would not see it)
        with limit_threads(1):
            yield counter
    finally:
        OBSERVER.reset(otoken)
        _ACTIVE.reset(token)


def _record(masks: dict[str, np.ndarray]) -> None:
    for counter in _ACTIVE.get():
        counter.add(masks)


def note_invalid(t: Any, *operands: Any) -> None:
    """Arithmetic: count ``invalid`` where the exact result ``t`` is NaN and no operand
    (arrays broadcasting to ``t``) is NaN.  Does nothing outside a ``flags()`` block."""
    if not _ACTIVE.get():
        return
    bad = np.isnan(np.asarray(t, np.float64))
    for v in operands:
        bad = bad & ~np.isnan(np.asarray(v, np.float64))
    _record({"invalid": bad})


def note_division(x: Any, y: Any) -> None:
    """``x / y``: count ``divide_by_zero`` where x is finite and nonzero and y is zero.
    Does nothing outside a ``flags()`` block."""
    if not _ACTIVE.get():
        return
    x, y = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    _record({"divide_by_zero": np.isfinite(x) & (x != 0) & (y == 0)})


def note_products(x: Any, y: Any, kind: str) -> None:
    """``dot`` (products along the last axes) or ``matmul`` (x's last axis with y's second
    last): count ``invalid`` once per output element with a product ``0 * Inf``.  Does
    nothing outside a ``flags()`` block."""
    if not _ACTIVE.get():
        return
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    zx, ix, zy, iy = x == 0, np.isinf(x), y == 0, np.isinf(y)
    if kind == "dot":
        bad = ((zx & iy) | (ix & zy)).any(axis=-1)
    else:
        f = np.float64  # counts of 0 * Inf pairs per output element (exact in float64)
        bad = (zx.astype(f) @ iy.astype(f) + ix.astype(f) @ zy.astype(f)) > 0
    _record({"invalid": bad})


_UNBOUNDED: dict[Format, Format] = {}


def unbounded(fmt: Format) -> Format:
    """The format with ``fmt``'s precision and float64's exponent range (signed, with
    Inf and NaN): rounding to it is rounding "as if the exponent range were unbounded"
    for every value float64 holds.  Integer formats: the 63-bit signed integers."""
    u = _UNBOUNDED.get(fmt)
    if u is None:
        if fmt.kind == "int":
            u = Format(f"{fmt.name}_unbounded", kind="int", bits=63)
        else:
            u = Format(f"{fmt.name}_unbounded", ebits=11, mbits=fmt.mbits, bias=1023)
        _UNBOUNDED[fmt] = u
    return u


def _numpy(v: Any) -> Any:
    """A numpy copy of a tensor (flags are counted on the host), else v as an array."""
    if v is None:
        return None
    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    return np.asarray(v)


def _observe(x: Any, fmt: Format, mode: str, policy: str, ftz: bool, daz_below: Any,
             sticky: Any, result: Any) -> None:
    """``rounding.OBSERVER`` inside a block: derive the flags of one rounding call and
    count them.  The routine is called again here (unbounded variant, ftz off), with the
    observer switched off so those calls are not counted."""
    token = OBSERVER.set(None)
    try:
        masks = rounding_flags(_numpy(x), fmt, mode, policy, ftz=ftz, daz_below=daz_below,
                               sticky=_numpy(sticky), result=_numpy(result))
    finally:
        OBSERVER.reset(token)
    _record(masks)


def rounding_flags(x: Any, fmt: Format, mode: str, policy: str, *, ftz: bool = False,
                   daz_below: float | None = None, sticky: Any = None,
                   result: Any) -> dict[str, np.ndarray]:
    """The flags (boolean arrays shaped like x) of ``result = round_values(x, fmt, mode,
    policy, ftz=ftz, daz_below=daz_below, sticky=sticky)``; the rules are in the module
    docstring.  ``mode`` and ``policy`` are canonical names."""
    x = np.asarray(x, np.float64)
    r = np.asarray(result, np.float64)
    s = np.zeros(x.shape, np.uint8) if sticky is None else np.broadcast_to(
        np.asarray(sticky, np.uint8), x.shape)
    no = np.zeros(x.shape, bool)
    with np.errstate(all="ignore"):
        flushed = no
        if daz_below is not None:
            flushed = (np.abs(x) < daz_below) & ((x != 0) | (s != 0))
            x = np.where(flushed, np.copysign(0.0, x), x)
            s = np.where(flushed, 0, s).astype(np.uint8)
        nan_in = np.isnan(x)
        inf_in = np.isinf(x) & (s == 0)
        finite = ~nan_in & ~inf_in  # a sticky Inf is a finite value past float64
        exact = (s == 0) & (r == x)
        if fmt.kind == "int":
            return _int_flags(x, s, r, fmt, mode, nan_in, inf_in, finite, exact, policy, flushed)
        bad = np.zeros(x.shape, bool)
        if not fmt.signed:
            bad = ~nan_in & np.signbit(x) & ((x != 0) | (s != 0))
            if not fmt.zero:
                bad |= (x == 0) & (s == 0)
        invalid = (nan_in & ~fmt.has_nan) | bad | (inf_in & np.isnan(r))
        saturated = (nan_in | inf_in) & np.isfinite(r)
        fin = finite & ~bad
        if mode in STOCHASTIC:
            ax = np.abs(x)
            overflow = fin & ((ax > fmt.max) | ((ax == fmt.max) & (s != 0)))
            tiny = fin & ~((x == 0) & (s == 0)) & (ax < fmt.smallest_normal)
        else:
            u = np.abs(round_values(x, unbounded(fmt), mode, "inf", sticky=s))
            overflow = fin & (u > fmt.max)
            # a nonzero value never rounds to 0 with an unbounded range: a u of 0 is a value
            # below float64's range (a zero with a sticky part), tiny as well
            tiny = fin & ~((x == 0) & (s == 0)) & (u < fmt.smallest_normal)
        inexact = fin & (overflow | ~exact)
        saturated = saturated | (overflow & np.isfinite(r))
        if ftz:
            # stochastic modes: whether the value would have been a nonzero subnormal is
            # judged with floatfmt's own stochastic mode (the P3109 variants need their bits)
            m0 = "stochastic" if mode in STOCHASTIC else mode
            r0 = round_values(x, fmt, m0, policy, sticky=s, rng=np.random.default_rng(0))
            flushed = flushed | (fin & (r == 0) & (r0 != 0) & np.isfinite(r0)
                                 & (np.abs(r0) < fmt.smallest_normal))
    return {"inexact": inexact, "underflow": tiny & inexact, "overflow": overflow,
            "invalid": invalid, "divide_by_zero": no, "saturated": saturated, "flushed": flushed}


def _int_flags(x: np.ndarray, s: np.ndarray, r: np.ndarray, fmt: Format, mode: str,
               nan_in: np.ndarray, inf_in: np.ndarray, finite: np.ndarray, exact: np.ndarray,
               policy: str, flushed: np.ndarray) -> dict[str, np.ndarray]:
    """``rounding_flags`` for an integer format (IEEE 754 5.8 conversions to integer)."""
    no = np.zeros(x.shape, bool)
    if mode in STOCHASTIC:
        out = finite & ((x > fmt.max) | (x < fmt.min) | ((x == fmt.max) & (s != 0))
                        | ((x == fmt.min) & (s != 0)))
    else:
        u = round_values(x, unbounded(fmt), mode, "saturate", sticky=s)
        out = finite & ((u > fmt.max) | (u < fmt.min))
    invalid = nan_in | inf_in | out
    saturated = (inf_in & np.isfinite(r)) | (out & (policy != "wrap"))
    inexact = finite & ~out & ~exact
    return {"inexact": inexact, "underflow": no, "overflow": no, "invalid": invalid,
            "divide_by_zero": no, "saturated": saturated, "flushed": flushed}
