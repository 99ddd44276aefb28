"""Figures of the formats: layouts, range and precision, value grids, rounding
error, spacing, gradient underflow, and the 1.0 + 0.0001 picture.

Every function returns a ``matplotlib.figure.Figure`` built without pyplot (so
nothing is shown and no global state changes); display it in Jupyter or save
it with ``fig.savefig``.  ``write_figures(out_dir)`` writes all seven as PNG,
byte for byte the same on every run.

    >>> fig = plot_bit_layouts(["fp16", "bf16"])
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['fp16 (16 bits)', 'bf16 (16 bits)']
"""

from __future__ import annotations

import math
import os

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..core.cast import cast
from ..core.codec import ulp, values
from ..course import gradient_sample
from .numtext import pow2_text
from ..core.formats import get_format

__all__ = ["precision_probe", "plot_precision_probe", "plot_bit_layouts", "plot_range_precision", "plot_number_line", "plot_rounding_error",
           "plot_spacing", "plot_gradient_underflow", "plot_fp16_grid", "write_figures",
           "gradient_sample", "FIGURES"]

FIELD_COLOURS = {"sign": "#f6b8c0", "exponent": "#b7d3f2", "mantissa": "#bfe5b4", "value": "#f8df9b",
                 "unused": "#eeeeee"}
# One colour per format across figures.
FORMAT_COLOURS = {"fp64": "#444444", "fp32": "#1f77b4", "tf32": "#17becf", "fp16": "#d62728",
                  "bf16": "#2ca02c", "fp8_e4m3": "#9467bd", "fp8_e5m2": "#ff7f0e",
                  "fp6_e2m3": "#8c564b", "fp6_e3m2": "#e377c2", "fp4_e2m1": "#7f7f7f",
                  "int8": "#bcbd22"}


def _colour(name: str) -> str:
    return FORMAT_COLOURS.get(name, "#333333")


def _names(formats) -> list[str]:
    if isinstance(formats, str):
        formats = [formats]
    return [get_format(f).name for f in formats]


# ----------------------------------------------------------------------------- 1
def plot_bit_layouts(formats=("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2",
                              "fp6_e2m3", "fp4_e2m1", "int8")) -> Figure:
    """Figure 1: the bit layout of each format, one box per bit coloured by
    field (sign, exponent, mantissa; integers: sign and value bits).  TF32 is
    drawn inside the 32-bit word GPUs keep it in, its 13 unused bits grey."""
    names = _names(formats)
    width = max(32 if n == "tf32" else get_format(n).bits for n in names)
    fig = Figure(figsize=(12, 0.55 * len(names) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    for row, name in enumerate(names):
        f = get_format(name)
        y = row
        if f.kind == "int":
            fields = [("sign", 1), ("value", f.bits - 1)] if f.signed else [("value", f.bits)]
        else:
            fields = [("sign", int(f.signed)), ("exponent", f.ebits), ("mantissa", f.mbits)]
        if name == "tf32":
            fields.append(("unused", 13))
        x = 0
        for field, n in fields:
            if not n:
                continue
            for k in range(n):
                ax.add_patch(Rectangle((x + k, y - 0.35), 1, 0.7, facecolor=FIELD_COLOURS[field],
                                       edgecolor="#555555", linewidth=0.6,
                                       hatch="//" if field == "unused" else None))
            label = {"sign": "s", "exponent": f"exponent {n}", "mantissa": f"mantissa {n}",
                     "value": f"{n} value bits", "unused": "13 bits unused in the fp32 word"}[field]
            if field == "exponent" and n < 5:
                label = f"exp {n}" if n > 2 else f"e{n}"
            if field == "mantissa" and n < 4:
                label = f"man {n}" if n > 2 else f"m{n}"
            ax.text(x + n / 2, y, label, ha="center", va="center", fontsize=9,
                    bbox=None if n < 3 else dict(boxstyle="round,pad=0.15", facecolor="white",
                                                 edgecolor="none", alpha=0.85))
            x += n
    ax.set_xlim(-0.5, width + 0.5)
    ax.set_ylim(len(names) - 0.4, -0.6)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([f"{n} ({get_format(n).bits} bits)" for n in names], fontsize=10)
    ax.set_xticks(range(0, width + 1, 4))
    ax.set_xlabel("bit position, counted from the most significant bit")
    ax.set_title("Bit layouts: the exponent sets the range, the mantissa the precision")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    return fig


# ----------------------------------------------------------------------------- 2
def plot_range_precision(formats=("fp32", "tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3",
                                  "fp6_e3m2", "fp6_e2m3", "fp4_e2m1")) -> Figure:
    """Figure 2: left, each format's normal range (dark) and subnormal range
    (light) on a log2 axis; right, its precision (significand bits) with eps.
    BF16 shares FP32's range bar; its precision bar is 3 bits shorter than
    FP16's (eps 8x larger), and TF32's is FP16's."""
    names = _names(formats)
    fig = Figure(figsize=(12, 0.5 * len(names) + 1.6), layout="constrained")
    ax, bx = fig.subplots(1, 2, sharey=True, width_ratios=[3, 1.3])
    for row, name in enumerate(names):
        f = get_format(name)
        c = _colour(name)
        lo_n, hi = math.log2(f.smallest_normal), math.log2(f.max)
        if f.subnormals:
            lo_s = math.log2(f.smallest_subnormal)
            ax.barh(row, lo_n - lo_s, left=lo_s, height=0.6, color=c, alpha=0.35)
        ax.barh(row, hi - lo_n, left=lo_n, height=0.6, color=c)
        mx = f"{f.max:g}" if f.max < 1e6 else f"{f.max:.3g}"
        if hi > 100:  # long bars: label inside, so nothing runs off the axes
            ax.text(hi - 2, row, f"max {mx}", va="center", ha="right", fontsize=8.5, color="white")
        else:
            ax.text(hi + 2, row, f"max {mx}", va="center", fontsize=8.5)
        p = f.precision_bits
        bx.barh(row, p, height=0.6, color=c)
        bx.text(p + 0.4, row, f"eps 2^-{f.mbits}" if f.mbits else "eps 1", va="center", fontsize=8.5)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=10)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlim(-160, 160)
    ax.set_xlabel("log2 |value|   (light: subnormal range, dark: normal range)")
    ax.set_title("Range: where values can live")
    ax.axvline(0, color="#999999", linewidth=0.8)
    ax.grid(axis="x", alpha=0.3)
    bx.set_xlim(0, 32)
    bx.set_xlabel("significand bits p (eps = 2^(1-p))")
    bx.set_title("Precision: how finely")
    bx.grid(axis="x", alpha=0.3)
    fig.suptitle(range_precision_title(), fontsize=12)
    return fig


def range_precision_title() -> str:
    """Figure 2's headline, with the precision ratios computed from the formats:
    bf16 has fp32's exponent range but an eps 2^(10-7) = 8 times fp16's, and it
    is tf32 that has fp16's 10 fraction bits.

    >>> range_precision_title()
    "Range and precision: bf16 keeps fp32's range, but its eps is 8x fp16's; tf32 has fp16's precision"
    """
    b, h, t = get_format("bf16"), get_format("fp16"), get_format("tf32")
    coarser = 2 ** (h.mbits - b.mbits)
    same = "tf32 has fp16's precision" if t.mbits == h.mbits else f"tf32 has {t.mbits} fraction bits"
    return f"Range and precision: bf16 keeps fp32's range, but its eps is {coarser}x fp16's; {same}"


# ----------------------------------------------------------------------------- 3
def plot_number_line(formats=("fp8_e4m3", "fp6_e2m3", "fp4_e2m1")) -> Figure:
    """Figure 3: every finite value of small formats on a number line, on a
    linear axis (left) and, for the positive values, a log2 axis (right);
    subnormals in orange."""
    names = _names(formats)
    fig = Figure(figsize=(12, 1.7 * len(names) + 0.8), layout="constrained")
    axes = fig.subplots(len(names), 2, squeeze=False)
    for row, name in enumerate(names):
        f = get_format(name)
        v = values(f)
        sub = (np.abs(v) < f.smallest_normal) & (v != 0)
        lin, lg = axes[row]
        for ax, xs, subs in ((lin, v, sub), (lg, v[v > 0], sub[v > 0])):
            xx = np.log2(xs) if ax is lg else xs
            ax.vlines(xx[~subs], 0, 1, color=_colour(name), linewidth=0.9)
            ax.vlines(xx[subs], 0, 1, color="#ff7f0e", linewidth=0.9)
            ax.set_yticks([])
            ax.set_ylim(0, 1.25)
            for side in ("top", "right", "left"):
                ax.spines[side].set_visible(False)
        lin.set_title(f"{name}: {v.size} finite values, linear axis", fontsize=10, loc="left")
        lg.set_title(f"{name}: {int((v > 0).sum())} positive values, log2 axis "
                     "(orange: subnormal)", fontsize=10, loc="left")
        lin.set_xlabel("value")
        lg.set_xlabel("log2 value")
    return fig


# ----------------------------------------------------------------------------- 4
def _midpoints(f, lo, hi):
    """Midpoints between consecutive positive values of f within [lo, hi]: where
    rounding makes its largest relative error."""
    if f.bits <= 16:
        v = values(f)
        v = v[v >= 0]
    else:  # wider formats: the grid of the binades in range
        e = np.arange(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)
        m = np.arange(1 << min(f.mbits, 10)) / (1 << min(f.mbits, 10))
        v = np.ldexp(1 + m[None, :], e[:, None]).ravel()
    mid = (v[:-1] + v[1:]) / 2
    return mid[(mid >= lo) & (mid <= hi)]


def plot_rounding_error(formats=("fp16", "bf16", "fp8_e5m2", "fp8_e4m3"), zoom="fp8_e4m3") -> Figure:
    """Figure 4: relative rounding error |cast(x) - x| / |x|.  Left, every x
    in [1, 16] for one small format (``zoom``): zero at each representable
    value, peaks at the midpoints, the peaks shrinking across each binade and
    jumping back at each power of two.  Right, for several formats, the
    largest error (at the midpoints) against magnitude: the sawtooth between
    u/2 and u = 2^-p, rising to 100% where values underflow."""
    names = _names(formats)
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    ax, bx = fig.subplots(1, 2, width_ratios=[1, 1.25])
    z = get_format(zoom)
    x = np.linspace(1.0, 16.0, 6001)
    r = np.abs(cast(x, z) - x) / x
    ax.plot(x, 100 * r, color=_colour(z.name), linewidth=0.9, label=f"{z.name}, every x")
    m = _midpoints(z, 1.0, 16.0)
    ax.plot(m, 100 * np.abs(cast(m, z) - m) / m, "o-", color="black", markersize=3, linewidth=0.8,
            label="at the midpoints (worst case)")
    u = 2.0 ** -(z.mbits + 1)
    ax.axhline(100 * u, color="#999999", linestyle="--", linewidth=0.8)
    ax.text(16, 100 * u, f"u = 2^-{z.mbits + 1}", ha="right", va="bottom", fontsize=9, color="#666666")
    ax.set_xlabel("x")
    ax.set_ylabel("relative error of rounding x (%)")
    ax.set_ylim(0, 100 * u * 1.3)
    ax.set_title(f"{z.name}: the error of each x in [1, 16]", fontsize=10)
    ax.legend(loc="upper right", fontsize=9, framealpha=0.95)
    lo, hi = 2.0 ** -26, 2.0 ** 17
    for name in names:
        f = get_format(name)
        m = _midpoints(f, lo, min(hi, f.max))
        err = np.abs(cast(m, f) - m) / m
        bx.plot(m, err, color=_colour(name), linewidth=0.8, label=f"{name} (u = 2^-{f.mbits + 1})")
    bx.set_xscale("log", base=2)
    bx.set_yscale("log")
    bx.set_ylim(2e-5, 2)
    bx.set_xlabel("x (log2 axis)")
    bx.set_ylabel("largest relative error near x")
    bx.set_title("Largest error against magnitude: the sawtooth between u/2 and u,\n"
                 "rising to 100% below the smallest subnormal", fontsize=10)
    bx.legend(loc="lower left", fontsize=8.5, ncol=2, framealpha=0.95)
    bx.grid(alpha=0.3)
    return fig


# ----------------------------------------------------------------------------- 5
def plot_spacing(formats=("fp32", "fp16", "tf32", "bf16", "fp8_e5m2", "fp8_e4m3")) -> Figure:
    """Figure 5: the spacing (ulp) of each format against magnitude, log2-log2;
    a staircase that doubles at every power of two, flat in the subnormal
    range, ending at the format's max."""
    names = _names(formats)
    fig = Figure(figsize=(10, 5.5), layout="constrained")
    ax = fig.add_subplot()
    x = np.geomspace(2.0 ** -30, 2.0 ** 20, 4000)
    for name in names:
        f = get_format(name)
        xs = x[x <= f.max]
        s = ulp(xs, f)
        same = [o for o in names[:names.index(name)] if get_format(o).mbits == f.mbits]
        label = f"{name} (same steps as {same[0]} where both exist)" if same else name
        ax.step(np.log2(xs), np.log2(s), where="post", color=_colour(name), label=label,
                linewidth=2.2 if same else 1.2, linestyle=(0, (3, 2)) if same else "-")
        if f.max <= x[-1]:
            ax.plot(math.log2(f.max), math.log2(ulp(f.max, f)), "o", color=_colour(name), markersize=4)
    ax.set_xlabel("log2 |x|")
    ax.set_ylabel("log2 spacing (ulp) at x")
    ax.set_title("Spacing between neighbours: it grows with |x|; flat where subnormal; dots mark max",
                 fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    return fig


# ----------------------------------------------------------------------------- 6
def _fractions(g, fmt):
    r = cast(g, fmt)
    zero = float(np.mean(r == 0))
    over = float(np.mean(~np.isfinite(r)))
    sub = float(np.mean((r != 0) & (np.abs(r) < get_format(fmt).smallest_normal)))
    return zero, sub, over


def plot_gradient_underflow(formats=("fp16", "bf16", "fp8_e5m2", "fp8_e4m3"), scale=2.0 ** 16,
                            sample=None) -> Figure:
    """Figure 6: a gradient-like sample (``course.gradient_sample()``, magnitudes
    around 1e-6) against each
    format's representable range, before and after multiplying by a loss
    scale (default 2^16); the fractions that underflow to 0, land among the
    subnormals, or overflow are printed beside each format."""
    g = gradient_sample() if sample is None else np.asarray(sample, np.float64)
    names = _names(formats)
    fig = Figure(figsize=(12, 8.5), layout="constrained")
    hr = [2.2, 0.3 * len(names) + 0.4]
    axes = fig.subplots(4, 1, sharex=True, height_ratios=hr + hr)
    bins = np.linspace(-14, 10, 145)
    for k, (s, title) in enumerate(((1.0, "as computed"),
                                    (scale, f"after loss scaling by {_pow_text(scale)}"))):
        h, b = axes[2 * k], axes[2 * k + 1]
        gs = g * s
        h.hist(np.log10(np.abs(gs[gs != 0])), bins=bins, color="#999999")
        h.set_ylabel("count")
        h.set_title(f"Gradients {title}", loc="left", fontsize=11)
        labels = []
        for row, name in enumerate(names):
            f = get_format(name)
            c = _colour(name)
            lo_n, hi = math.log10(f.smallest_normal), math.log10(f.max)
            lo_s = math.log10(f.smallest_subnormal)
            b.barh(row, lo_n - lo_s, left=lo_s, height=0.6, color=c, alpha=0.35)
            b.barh(row, hi - lo_n, left=lo_n, height=0.6, color=c)
            zero, sub, over = _fractions(gs, f)
            labels.append(f"{name}: {100 * zero:.2f}% → 0, {100 * sub:.1f}% subnormal, "
                          f"{100 * over:.3f}% overflow")
        b.set_yticks(range(len(names)))
        b.set_yticklabels(labels, fontsize=9)
        b.set_ylim(len(names) - 0.5, -0.5)
        b.tick_params(axis="y", length=0)
    axes[-1].set_xlim(bins[0], bins[-1])
    axes[-1].set_xlabel("log10 |gradient|   (bars: light = subnormal range, dark = normal range)")
    fig.suptitle("Gradients against each format's range: fp16 loses the small ones until the loss is scaled",
                 fontsize=12)
    return fig


def _pow_text(s: float) -> str:
    return (s > 0 and pow2_text(s)) or f"{s:g}"


# ----------------------------------------------------------------------------- 7
def plot_fp16_grid(weight=1.0, update=1e-4, fmt="fp16") -> Figure:
    """Figure 7: the fp16 values around 1.0, where 1.0 + 0.0001 falls, and why
    it rounds back to 1.0 (it is below the midpoint to the next value); fp32's
    result for comparison."""
    f = get_format(fmt)
    target = weight + update
    stored = cast(target, f)
    step_up = ulp(weight, f)
    below = ulp(weight - step_up / 4, f)
    grid = np.concatenate([weight - below * np.arange(2, 0, -1), weight + step_up * np.arange(0, 4)])
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.axhline(0, color="#333333", linewidth=1)
    ax.vlines(grid, -0.2, 0.2, color=_colour(f.name), linewidth=2, label=f"{f.name} values")
    for v, txt in ((weight, f"{weight:g}"), (weight + step_up, f"{weight + step_up!r}"),
                   (weight - below, f"{weight - below!r}")):
        ax.text(v, -0.3, txt, ha="center", va="top", fontsize=9)
    mid = weight + step_up / 2
    ax.vlines([mid], -0.12, 0.12, color="#777777", linestyle=":", linewidth=1.5)
    ax.text(mid, -0.3, f"midpoint\n{mid!r}", ha="center", va="top", fontsize=9, color="#555555")
    ax.plot([target], [0], "v", color="black", markersize=9, label=f"{weight:g} + {update:g} (exact)")
    for y, end, txt, c in ((0.4, target, f"the update: {update:g}", "black"),
                           (0.62, mid, f"half a step: {step_up / 2:.3g} (needed to move)", "#777777")):
        ax.annotate("", xy=(end, y), xytext=(weight, y),
                    arrowprops=dict(arrowstyle="|-|", color=c, linewidth=1.2, shrinkA=0, shrinkB=0,
                                    mutation_scale=4))
        ax.text(end + step_up * 0.04, y, txt, va="center", fontsize=9.5, color=c)
    ax.text(weight + step_up * 1.1, 0.95,
            f"{weight:g} + {update:g} = {target:g} is below the midpoint, so round-to-nearest\n"
            f"stores {stored:g}: in {f.name} the update is lost", fontsize=10.5, va="bottom")
    f32 = cast(target, "fp32")
    ax.text(grid[-1], -0.75, f"fp32 keeps it: {target:g} is stored as {f32!r}\n"
                             f"(spacing near 1 is {ulp(weight, 'fp32'):.3g} instead of {step_up:.3g})",
            ha="right", va="bottom", fontsize=9, color="#1f77b4")
    ax.set_ylim(-0.85, 1.35)
    ax.set_xlim(grid[0] - step_up / 2, grid[-1] + step_up / 2)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel(f"value (red ticks: every {f.name} number; spacing 2^{int(math.log2(below))} below 1, "
                  f"2^{int(math.log2(step_up))} above)")
    ax.legend(loc="upper left", fontsize=9, framealpha=0.95)
    ax.set_title(f"The vanishing update: {weight:g} + {update:g} in {f.name}", fontsize=12)
    return fig


# ----------------------------------------------------------------------------- all
# ----------------------------------------------------------------------------- tensor-core probe
def precision_probe(model, fmt, ds) -> np.ndarray:
    """The precision probe of Fasi, Higham, Mikaitis and Pranesh on a tensor-core
    model: a = [2^7, -2^7, u1], b = [2^7, 2^7, u2] with u1 * u2 = 2^(14-d) (u1 and
    u2 powers of two, exact in ``fmt``).  Returns result / 2^(14-d) for each d: 1
    while the small product survives the alignment to 2^14 (d <= F), else 0.

    >>> precision_probe("h100", "bf16", [25, 26]).tolist()
    [1.0, 0.0]
    """
    from ..arith.accumulate import dot
    out = []
    for d in ds:
        e = 14 - int(d)
        u1, u2 = 2.0 ** (e // 2), 2.0 ** (e - e // 2)
        r = dot([2.0 ** 7, -2.0 ** 7, u1], [2.0 ** 7, 2.0 ** 7, u2], fmt, model=model)
        out.append(float(r) / 2.0 ** e)
    return np.array(out)


def plot_precision_probe(gpus=("v100", "a100", "h100"), fmt="fp16", ds=range(18, 30)) -> Figure:
    """Lesson 07's figure: ``precision_probe`` for each GPU's preset; the step from
    1 to 0 sits at d = F + 1."""
    from ..arith.matrixunit.tensorcore import get_model
    ds = np.asarray(list(ds))
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.subplots()
    for gpu, marker, shift in zip(gpus, "os^D", (-0.12, 0.0, 0.12, 0.24)):
        m = get_model(gpu, fmt)
        ax.plot(ds + shift, precision_probe(m, fmt, ds), marker, label=f"{gpu}: F = {m.F}")
    ax.set_xlabel("d  (the small product is 2^(14-d))")
    ax.set_ylabel("result / exact")
    ax.set_yticks([0, 1])
    ax.set_title("The small term survives while d <= F")
    ax.legend()
    return fig


FIGURES = (
    ("fig1_bit_layouts.png", plot_bit_layouts),
    ("fig2_range_precision.png", plot_range_precision),
    ("fig3_number_line.png", plot_number_line),
    ("fig4_rounding_error.png", plot_rounding_error),
    ("fig5_spacing.png", plot_spacing),
    ("fig6_gradient_underflow.png", plot_gradient_underflow),
    ("fig7_fp16_grid.png", plot_fp16_grid),
)


def write_figures(out_dir="figures", dpi=110) -> list[str]:
    """Write every figure as PNG into ``out_dir`` (created if missing) and
    return the paths.  The files are identical from run to run (fixed data,
    no timestamps in the PNG metadata)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for fname, fn in FIGURES:
        fig = fn()
        path = os.path.join(out_dir, fname)
        fig.savefig(path, dpi=dpi, metadata={"Software": None})
        paths.append(path)
    return paths
