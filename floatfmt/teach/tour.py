"""``floatfmt tour``: a narrated walk through the key facts, every number
computed on the spot with floatfmt (and, where installed, ml_dtypes for the
comparison at the end).  Runs in well under ten seconds."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np

from ..core.cast import cast
from ..core.codec import encode, ulp
from .compare import compare
from .explain.entry import explain
from .numtext import exact_decimal
from ..core.formats import get_format, hex_code

__all__ = ["run_tour", "DOUBLE_ROUNDING_X"]

# A float64 that ml_dtypes (and torch) convert to bf16 wrongly: they go through
# float32 first, which lands exactly on a bf16 midpoint.
DOUBLE_ROUNDING_X = float.fromhex("-0x1.5affff36664e1p-5")


def _pct(r) -> str:
    return f"{100 * r:.3g}%"


def _section(out, n, title):
    out(f"\n{n}. {title}\n" + "-" * (len(title) + 4))


def _formats_part(out) -> None:
    _section(out, 1, "The formats: the exponent buys range, the mantissa buys precision")
    out(compare(["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "int8"]).text())
    b, h = get_format("bf16"), get_format("fp16")
    out(f"\nbf16 has fp32's 8 exponent bits (max {b.max:.3g}) but only {b.mbits} mantissa bits; "
        f"fp16 has {h.mbits} mantissa bits but tops out at {h.max:g}.")


def _point_one_part(out) -> None:
    _section(out, 2, "0.1 is not 0.1 in any of them")
    out(f"{'format':<10} {'stored value of 0.1':<34} {'code':<11} {'relative error':>14}")
    for name in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "int8"):
        v = cast("0.1", name)
        rel = float(abs(Fraction(v) - Fraction("0.1")) / Fraction("0.1"))  # exact
        out(f"{name:<10} {exact_decimal(v) if len(exact_decimal(v)) <= 34 else repr(v):<34} "
            f"{hex_code(encode('0.1', name), name):<11} {_pct(rel):>14}")
    out("(\"0.1\" here is the decimal 0.1 itself; the float64 closest to it is the fp64 row.)")
    out("\nThe whole story of one value, bit by bit (ff.explain):\n")
    out(explain(0.1, "bf16").text())


def _update_part(out) -> None:
    _section(out, 3, "The vanishing update: weight 1.0 plus lr*grad = 0.0001")
    for name in ("fp16", "bf16", "fp32"):
        u = cast(1e-4, name)
        w = cast(1.0 + u, name)  # 1.0 + u is exact in float64, so this is one correct rounding
        gap = ulp(1.0, name)
        lost = "the update is LOST" if w == 1.0 else "the update survives"
        out(f"{name:<5} 1.0 + {u!r:<24} = {w!r:<20} spacing at 1.0 is {gap:.3g}; half of it is "
            f"{gap / 2:.3g} > 0.0001? {'yes' if gap / 2 > 1e-4 else 'no'}: {lost}")
    out("So mixed-precision training keeps an fp32 master copy of the weights and applies updates there.")


def _overflow_part(out) -> None:
    _section(out, 4, "Overflow: 70000 in fp16 and in bf16")
    for name in ("fp16", "bf16"):
        v = cast(70000, name)
        extra = f"(relative error {_pct(abs(v - 70000) / 70000)})" if math.isfinite(v) else \
            f"(fp16's max is {get_format(name).max:g})"
        out(f"{name:<5} 70000 -> {v!r:<8} {extra}")
    out("bf16 is coarse but never overflows where fp32 would not; fp16 turns large activations into Inf.")


def _underflow_part(out) -> None:
    _section(out, 5, "Underflow: a gradient of 1e-7 in fp16, and loss scaling")
    h = get_format("fp16")
    g = 1e-7
    scale = 2.0 ** 16
    g16 = cast(g, "fp16")
    out(f"fp16 smallest normal {h.smallest_normal:.4g}, smallest subnormal {h.smallest_subnormal:.4g}")
    out(f"1e-7 in fp16             -> {g16!r}  ({explain(g, 'fp16').cls}: only "
        f"{int(round(math.log2(g16 / h.smallest_subnormal))) + 1} significant bit(s), error "
        f"{_pct(abs(g16 - g) / g)})")
    out(f"1e-7 in fp16, flush-to-zero -> {cast(g, 'fp16', ftz=True)!r}  (kernels that flush subnormals)")
    out(f"2e-8 in fp16             -> {cast(2e-8, 'fp16')!r}  (below half the smallest subnormal: gone)")
    gs = cast(g * scale, "fp16")
    back = cast(gs / scale, "fp32")
    out(f"loss scale 2^16: 1e-7 * 65536 = {g * scale:.7g} -> fp16 {gs!r} (normal, error "
        f"{_pct(abs(gs - g * scale) / (g * scale))}); unscaled in fp32: {back!r}")
    out(f"bf16 needs no scaling: 1e-7 in bf16 -> {cast(g, 'bf16')!r} ({explain(g, 'bf16').cls})")


def _e4m3_edge_part(out) -> None:
    _section(out, 6, "fp8_e4m3 at its edge: 448, 464, 480 under each overflow policy")
    out(f"{'x':>5}  {'default (nan)':>14}  {'saturate':>9}  {'inf':>14}")
    out(f"{'':>5}  {'':>14}  {'':>9}  {'(no Inf code)':>14}")
    for x in (448, 464, 480):
        cells = []
        for pol in (None, "saturate", "inf"):
            try:
                cells.append(repr(cast(x, "fp8_e4m3", overflow=pol)))
            except ValueError:
                cells.append("ValueError")
        out(f"{x:>5}  {cells[0]:>14}  {cells[1]:>9}  {cells[2]:>14}")
    e = explain(464, "fp8_e4m3")
    out(f"464 is exactly halfway between 448 and 480 (tie={e.tie}); ties go to the even code, "
        f"448 ({hex_code(e.code, 'fp8_e4m3')}), so it does not overflow. Just above the tie, 465 -> "
        f"{cast(465, 'fp8_e4m3')!r} by default and {cast(465, 'fp8_e4m3', overflow='saturate')!r} when "
        "saturating (what PTX cvt .satfinite and recent PyTorch do).")


def _double_rounding_part(out) -> None:
    _section(out, 7, "Double rounding: the float64 -> bf16 case ml_dtypes gets wrong")
    xd = DOUBLE_ROUNDING_X  # (x, the loop variable above, is an int)
    right = cast(xd, "bf16")
    x32 = cast(xd, "fp32")
    tie = explain(x32, "bf16")
    out(f"x = float.fromhex('{xd.hex()}') = {xd!r}")
    try:
        import ml_dtypes
        theirs = float(np.float64(xd).astype(ml_dtypes.bfloat16))
        out(f"ml_dtypes {ml_dtypes.__version__}: np.float64(x).astype(bfloat16) = {theirs!r}")
    except ImportError:
        theirs = cast(x32, "bf16")
        out(f"(ml_dtypes is not installed; going through float32 as it does gives {theirs!r})")
    out(f"floatfmt:  ff.cast(x, 'bf16')                 = {right!r}   (rounded once: correct)")
    out(f"Why: float32(x) = {x32!r} lies exactly halfway between the bf16 neighbours "
        f"{tie.lower!r} and {tie.upper!r} (tie={tie.tie}), so ties-to-even picks {cast(x32, 'bf16')!r}; "
        f"x itself is {'below' if abs(xd) < abs(x32) else 'above'} that midpoint in magnitude, "
        f"so the right answer is {right!r}.")


def run_tour(figures_out=None, file=None) -> None:
    """Print the tour to ``file`` (default stdout); with ``figures_out`` also
    write the figures there (``floatfmt tour --figures``)."""
    stream = file or sys.stdout

    def out(s=""):
        print(s, file=stream)

    out("floatfmt tour: what deep-learning number formats do to your numbers")
    out("Every number below is computed now, by rounding exactly once from the exact input.")

    for part in (_formats_part, _point_one_part, _update_part, _overflow_part,
                 _underflow_part, _e4m3_edge_part, _double_rounding_part):
        part(out)

    out("\nNext: ff.explain(x, fmt) for any value and format; `floatfmt figures` for the pictures;")
    out("the lessons and assignments in notebooks/.")
    if figures_out is not None:
        from .plot import write_figures
        paths = write_figures(figures_out)
        out(f"\nWrote {len(paths)} figures to {figures_out}/: " + ", ".join(p.split('/')[-1] for p in paths))

