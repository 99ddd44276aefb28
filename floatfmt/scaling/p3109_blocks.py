"""IEEE P3109 block conversion: ``ConvertToBlockMaxAbsFinite`` and ``BlockProject``.

P3109 v4.0 section 5 stores a block as one scale factor s (format f_s) and B
elements r_i (format f_r); element i stands for s * r_i.  Two operations are
modelled here, both by the one rounding routine (``cast`` for the scale; for the
elements ``eft.exact_quotient`` carries the exact x_i / S to ``round_values``, so
each is rounded once; x_i and S are taken as the exact values they are):

``block_project(s, X, f_r, ...)`` (section 5.1.2), with S the value of s:
    Z_i = NaN if S or X_i is NaN; 0 if S = 0; sgn(X_i) sgn(S) if S is +-Inf;
    X_i / S otherwise; r_i = Project(Z_i) under (rounding, overflow).

``convert_to_block_max_abs_finite(x, B, f_s, f_r, ...)`` (section 5.2.3):
    S = the largest finite |x_i| of the block (+Inf when every x_i is infinite
    or NaN and one is infinite, NaN when all are NaN: the MaximumFinite reduction
    started from NaN, section 4.11.3); s = Project_{f_s}(S) under (scale_rounding,
    scale_overflow); then r = block_project(s, x).

This is not the OCP MX rule (scale 2**(floor(log2 amax) - emax_elem), see
``blockscale``): here the scale is the block's max itself, rounded to f_s, so the
largest element becomes (about) 1.  Section 5.2.3 NOTE 5 suggests rounding the
scale ``up`` and saturating the elements; the defaults follow the report's
conformance projection (nearest_even, the formats' SatNone) for both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.cast import cast
from ..core.formats import get_format
from ..arith.eft import exact_quotient
from ..core.rounding import STOCHASTIC, make_rng, resolve_mode, resolve_overflow, round_values

__all__ = ["block_project", "convert_to_block_max_abs_finite"]


def _blocks(x: np.ndarray, block_size: int, axis: int) -> np.ndarray:
    """x with ``axis`` moved last and split into (..., n_blocks, block_size)."""
    if not isinstance(block_size, (int, np.integer)) or isinstance(block_size, bool) \
            or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, not {block_size!r}")
    if x.ndim == 0:
        raise ValueError("convert_to_block_max_abs_finite needs an array with at least one axis")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for an array of {x.ndim} dimensions "
                         f"(valid: {-x.ndim}..{x.ndim - 1})")
    xm = np.moveaxis(x, axis, -1)
    n = xm.shape[-1]
    if n % block_size:
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        raise ValueError(f"block_size {block_size} does not divide the axis length {n}: "
                         f"valid block sizes for this axis are {divisors}")
    return xm.reshape(*xm.shape[:-1], n // block_size, block_size)


def block_project(scale: Any, x: Any, elem_fmt: Any, rounding: str = "nearest_even",
                  overflow: str | None = None) -> np.ndarray:
    """P3109 BlockProject (section 5.1.2): the elements r_i = Project(Z_i) of values x
    under one scale value S each (``scale`` broadcasts against ``x``).

    Z_i is NaN where S or x_i is NaN, 0 where S = 0, sgn(x_i) sgn(S) where S is
    +-Inf, else the exact x_i / S; it is rounded once to ``elem_fmt`` with
    ``rounding`` and ``overflow`` (None: the format's own policy).

    >>> block_project(2.0, [1.0, -3.0, 0.5], "binary8p4se").tolist()
    [0.5, -1.5, 0.25]
    >>> block_project(float("inf"), [1.0, -3.0, 0.0], "binary8p4se").tolist()
    [1.0, -1.0, 0.0]
    """
    fmt = get_format(elem_fmt)
    mode, policy = resolve_mode(rounding), resolve_overflow(overflow, fmt)
    X = np.asarray(x, np.float64)
    S = np.asarray(scale, np.float64)
    X, S = np.broadcast_arrays(X, S)
    plain = np.isfinite(S) & (S != 0) & ~np.isnan(X)
    with np.errstate(invalid="ignore"):
        z = np.where(np.isnan(S) | np.isnan(X), np.nan,
                     np.where(S == 0, 0.0, np.sign(X) * np.sign(S)))  # the special cases
    fine = mode in STOCHASTIC
    rng = make_rng(None) if fine else None
    t, cls = exact_quotient(np.where(plain, X, 1.0), np.where(plain, S, 1.0), fine)
    z = np.where(plain, t, z)
    if cls is not None:
        cls = np.where(plain, cls, 0).astype(np.asarray(cls).dtype)
    if fine:
        return round_values(z, fmt, mode, policy, rng=rng, resid=cls)
    return round_values(z, fmt, mode, policy, sticky=cls)


def convert_to_block_max_abs_finite(x: Any, block_size: int, scale_fmt: Any, elem_fmt: Any, *,
                                    scale_rounding: str = "nearest_even",
                                    scale_overflow: str | None = None,
                                    rounding: str = "nearest_even",
                                    overflow: str | None = None,
                                    axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """P3109 ConvertToBlockMaxAbsFinite (section 5.2.3): (scales, elements).

    ``x`` is split along ``axis`` into blocks of ``block_size`` values (the axis
    length must be a multiple).  Per block: S = max |x_i| over its finite x_i (+Inf
    if there is none but some x_i is infinite, NaN if all are NaN), the scale
    s = S rounded to ``scale_fmt`` under (``scale_rounding``, ``scale_overflow``),
    and the elements ``block_project(s, x_i, elem_fmt, rounding, overflow)``.

    Returns float64 values: scales of shape (..., n_blocks) and elements of x's
    shape (with ``axis`` where it was); ``encode`` gives their codes.

    >>> s, r = convert_to_block_max_abs_finite([3.0, -1.0, 0.5, 6.0], 2, "binary8p1uf",
    ...                                        "binary8p4se", scale_rounding="up")
    >>> s.tolist(), r.tolist()
    ([4.0, 8.0], [0.75, -0.25, 0.0625, 0.75])
    """
    X = np.asarray(x, np.float64)
    blocks = _blocks(X, block_size, axis)
    mag = np.abs(blocks)
    finite = np.isfinite(mag)
    with np.errstate(invalid="ignore"):
        m = np.max(np.where(finite, mag, -1.0), axis=-1)
    any_inf = np.isinf(mag).any(axis=-1)
    S = np.where(finite.any(axis=-1), m, np.where(any_inf, np.inf, np.nan))
    s = np.asarray(cast(S, get_format(scale_fmt), scale_rounding, scale_overflow), np.float64)
    r = block_project(s[..., None], blocks, elem_fmt, rounding, overflow)
    r = np.moveaxis(r.reshape(*blocks.shape[:-2], -1), -1, axis)
    return s, r
