"""Figures: every function runs headless and returns a Figure with the expected
axes, labels and data; `floatfmt figures` writes the PNGs, the same bytes twice."""

import hashlib
import math
import os

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from floatfmt import cli
from floatfmt.teach import plot  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _texts(fig):
    out = []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_title(loc="left"), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.texts]
        out += [t.get_text() for t in ax.get_yticklabels()]
        leg = ax.get_legend()
        if leg:
            out += [t.get_text() for t in leg.get_texts()]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    return "\n".join(out)


def test_bit_layouts_one_box_per_bit():
    fig = plot.plot_bit_layouts(["fp32", "tf32", "fp8_e4m3", "int8"])
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    ax = fig.axes[0]
    assert len(ax.patches) == 32 + (19 + 13) + 8 + 8  # tf32 drawn in its 32-bit word
    colours = {tuple(np.round(p.get_facecolor(), 3)) for p in ax.patches}
    assert len(colours) == 5  # sign, exponent, mantissa, integer value bits, unused
    t = _texts(fig)
    for s in ("fp32 (32 bits)", "tf32 (19 bits)", "exponent 8", "mantissa 23", "exp 4", "man 3",
              "7 value bits", "unused"):
        assert s in t
    assert "bit position" in ax.get_xlabel()


def test_range_precision_bars_match_formats():
    fig = plot.plot_range_precision(["fp32", "bf16", "fp16"])
    ax, bx = fig.axes
    assert "log2" in ax.get_xlabel() and "significand bits" in bx.get_xlabel()
    # dark (normal range) bars: from log2(smallest normal) to log2(max)
    widths = sorted(round(p.get_width(), 6) for p in ax.patches)
    fp16_normal = math.log2(65504) + 14
    fp32_normal = math.log2(float(np.finfo(np.float32).max)) + 126
    assert any(abs(w - fp16_normal) < 1e-6 for w in widths)
    assert any(abs(w - fp32_normal) < 1e-6 for w in widths)
    assert sorted(p.get_width() for p in bx.patches) == [8, 11, 24]  # significand bits p
    t = _texts(fig)
    assert "eps 2^-7" in t and "max 65504" in t and "bf16" in t


def test_range_precision_title_states_the_precision_ratio():
    """The headline must not call bf16's precision fp16-like: its eps is 8x fp16's
    (numpy / ml_dtypes epsilons, not floatfmt's tables), and tf32's equals fp16's."""
    import ml_dtypes
    ratio = float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps) / float(np.finfo(np.float16).eps)
    assert ratio == 8
    title = plot.plot_range_precision()._suptitle.get_text()
    assert "fp16-like" not in title and f"{ratio:g}x fp16's" in title
    assert "tf32 has fp16's precision" in title


def test_number_line_has_every_value():
    fig = plot.plot_number_line(["fp4_e2m1", "fp8_e4m3"])
    assert len(fig.axes) == 4
    lin = fig.axes[0]
    xs = np.concatenate([np.asarray(c.get_segments())[:, 0, 0] for c in lin.collections])
    assert sorted(xs.tolist()) == [-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6]
    t = _texts(fig)
    assert "fp4_e2m1: 15 finite values" in t and "fp8_e4m3: 253 finite values" in t
    assert "log2" in fig.axes[1].get_xlabel()


def test_rounding_error_sawtooth():
    fig = plot.plot_rounding_error(["fp16", "bf16"])
    ax, bx = fig.axes
    assert bx.get_xscale() == "log" and bx.get_yscale() == "log"
    assert "relative error" in ax.get_ylabel()
    # worst case for bf16 in a normal binade is u = 2^-8 at the bottom of each binade
    bf = next(l for l in bx.lines if l.get_label().startswith("bf16"))
    y = np.asarray(bf.get_ydata())
    normal = np.asarray(bf.get_xdata()) >= 2.0 ** -26
    assert y[normal].max() <= 2.0 ** -8 * (1 + 1e-9) and y[normal].max() > 2.0 ** -8 * 0.99
    fp16 = next(l for l in bx.lines if l.get_label().startswith("fp16"))
    assert np.nanmax(fp16.get_ydata()) == 1.0  # half the smallest subnormal rounds to 0
    assert "u = 2^-11" in _texts(fig)


def test_spacing_staircase():
    fig = plot.plot_spacing(["fp16", "bf16"])
    ax = fig.axes[0]
    fp16 = next(l for l in ax.lines if l.get_label() == "fp16")
    x, y = np.asarray(fp16.get_xdata()), np.asarray(fp16.get_ydata())
    assert np.all(y[x < -14] == -24)  # subnormal spacing 2^-24
    assert y[np.searchsorted(x, 0.0)] == -10  # ulp(1) = 2^-10
    assert ax.get_xlabel() == "log2 |x|" and "spacing" in ax.get_ylabel()


def test_gradient_underflow_fractions_printed():
    g = plot.gradient_sample(n=20000, seed=1)
    fig = plot.plot_gradient_underflow(["fp16", "bf16"], sample=g)
    assert len(fig.axes) == 4
    t = _texts(fig)
    zero16 = float(np.mean(np.float16(g) == 0))  # numpy's fp16 as the independent oracle
    assert f"fp16: {100 * zero16:.2f}% → 0" in t
    assert "bf16: 0.00% → 0" in t and "2^16" in t
    with np.errstate(over="ignore"):
        over = float(np.mean(np.isinf(np.float16(g * 2.0 ** 16))))
    assert "fp16: 0.00% → 0" in t and f"{100 * over:.3f}% overflow" in t


def test_fp16_grid_picture():
    fig = plot.plot_fp16_grid()
    t = _texts(fig)
    assert "1 + 0.0001" in t and "stores 1" in t and "1.0009765625" in t
    assert "1.00048828125" in t  # the midpoint
    assert "1.000100016593933" in t  # float32(1.0001), numpy agrees:
    assert repr(float(np.float32(1.0001))) == "1.000100016593933"


def test_no_pyplot_state():
    import matplotlib.pyplot as plt
    before = plt.get_fignums()
    plot.plot_spacing(["fp16"])
    assert plt.get_fignums() == before


def test_cli_figures_writes_files_deterministically(tmp_path, capsys):
    out = tmp_path / "a"
    assert cli.main(["figures", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    names = [n for n, _ in plot.FIGURES]
    assert len(names) == 7 and sorted(os.path.basename(p) for p in printed) == sorted(names)
    for n in names:
        data = (out / n).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    # the same bytes again
    again = tmp_path / "b"
    plot.plot_fp16_grid().savefig(again, dpi=110, metadata={"Software": None}, format="png")
    assert hashlib.sha256(again.read_bytes()).digest() == \
        hashlib.sha256((out / "fig7_fp16_grid.png").read_bytes()).digest()


def test_committed_figures_exist():
    for n, _ in plot.FIGURES:
        assert os.path.exists(os.path.join(ROOT, "figures", n)), f"run `floatfmt figures` ({n} missing)"


def test_precision_probe_survives_exactly_while_d_le_F():
    """Lesson 07's probe data: for every float preset, result / exact is 1 for d <= F and 0
    after (the figure once built the small product as 2^(2-d) and showed 0 everywhere).
    The h100/a100/v100 F values are also the published ones (Fasi et al.; Khattak & Mikaitis)."""
    from floatfmt.arith.matrixunit.tensorcore import tensorcore_models
    checked = 0
    for name, m in tensorcore_models().items():
        if m.fmt == "int8" or m.algorithm != "t_fdpa":  # AMD / block-scaled: test_matrixunits
            continue
        ds = np.arange(max(m.F - 6, 2), m.F + 5)
        r = plot.precision_probe(m, m.fmt, ds)
        assert r.tolist() == [1.0 if d <= m.F else 0.0 for d in ds], name
        checked += 1
    assert checked >= 15
    published = {"v100": 23, "a100": 24, "h100": 25}
    for gpu, F in published.items():
        r = plot.precision_probe(gpu, "fp16", np.arange(18, 30))
        assert int(np.arange(18, 30)[r == 1].max()) == F
    fig = plot.plot_precision_probe()
    ys = [line.get_ydata() for line in fig.axes[0].get_lines()]
    assert all(y.max() == 1 and y.min() == 0 for y in ys)
