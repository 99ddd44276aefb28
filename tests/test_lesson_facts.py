"""Facts the lessons state in prose (issue 27 item 5), computed here with independent
references (numpy float16, ml_dtypes, Fraction arithmetic, Python ints) and matched against
the lessons' text, so a wrong sentence fails without executing the notebooks."""

import json
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import pytest
import numpy as np

import floatfmt as ff

NB = Path(__file__).resolve().parents[1] / "notebooks"


def _text(name, kind="markdown"):
    nb = json.loads((NB / name).read_text(encoding="utf-8"))
    return " ".join(" ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == kind).split())


def test_lesson05_fp16_underflow_cut_is_half_the_smallest_subnormal():
    tiny = 2.0 ** -24
    assert float(np.float16(2.0 ** -25)) == 0.0                      # the tie goes to even: 0
    assert float(np.float16(2.0 ** -25 * (1 + 2 ** -20))) == tiny    # just above half: rounds up
    assert float(np.float16(tiny * 0.75)) == tiny
    t = _text("05_mixed_precision_training.ipynb")
    assert "everything left of the first red line becomes 0" not in t
    assert "half the smallest subnormal (2**-25)" in t and "round *up* to 2**-24" in t


def test_lesson05_lists_only_the_policies_it_trains():
    t = _text("05_mixed_precision_training.ipynb")
    code = _text("05_mixed_precision_training.ipynb", "code")
    side = t[t.index("every policy trained side by side"):][:300]
    head = side.split("(")[0]
    assert ("TF32" in head) == ('"tf32"' in code), head


def test_lesson01_e4m3_gains_seven_of_eight_codes():
    fn = ml_dtypes.finfo(ml_dtypes.float8_e4m3fn)
    top = [v for v in ff.values("fp8_e4m3") if np.isfinite(v) and 256 <= v < 512]
    assert len(top) == 7 and float(fn.max) == 448.0 == max(top)
    assert ff.info("fp8_e4m3_ieee").max == 240.0                     # the IEEE-style E4M3
    t = _text("01_bits.ipynb")
    assert "one more binade (its max is 448)" not in t and "7 of the 8 codes" in t and "240" in t


def test_lesson04_bf16_products_exact_in_fp32_barring_overflow_and_underflow():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 10, 2000).astype(ml_dtypes.bfloat16).astype(np.float64)
    b = rng.normal(0, 10, 2000).astype(ml_dtypes.bfloat16).astype(np.float64)
    p32 = (a.astype(np.float32) * b.astype(np.float32)).astype(np.float64)
    assert all(Fraction(x) * Fraction(y) == Fraction(p) for x, y, p in zip(a, b, p32))
    big = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    small = float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal)
    with np.errstate(over="ignore", under="ignore"):
        assert np.isinf(np.float32(big) * np.float32(big))            # overflow
        assert np.float32(small) * np.float32(small) == 0              # underflow
    h = np.finfo(np.float16)
    assert float(h.max) ** 2 < float(np.finfo(np.float32).max)         # fp16 products always fit
    assert (2.0 ** -24) ** 2 >= float(np.finfo(np.float32).smallest_subnormal)
    t = _text("04_arithmetic.ipynb")
    assert "barring overflow and underflow" in t


def test_lesson04_pairwise_and_kahan_give_the_correctly_rounded_sum():
    terms = [Fraction(float(np.float16(1e-4)))] * 10_000
    exact = sum(terms)
    assert float(np.float16(float(exact))) == 1.0                   # exact sum rounded once to fp16
    x = [1e-4] * 10_000
    assert ff.sum(x, "fp16", order="pairwise") == ff.sum(x, "fp16", order="kahan") == 1.0
    t = _text("04_arithmetic.ipynb")
    assert "rounded once to FP16" in t and "is 1.0" in t.replace("\n", " ")


def test_lesson04_fp16_running_sum_rises_above_fp32_before_it_stalls():
    u = float(np.float16(1e-4))
    s16 = s32 = np.float64(0)
    above = False
    for _ in range(4000):
        s16 = np.float64(np.float16(s16 + u))
        s32 = np.float64(np.float32(s32 + u))
        above |= s16 > s32
    assert above
    assert "runs *above* the FP32 one" in _text("04_arithmetic.ipynb")


def test_lesson04_speed_caveats():
    t = _text("04_arithmetic.ipynb")
    assert "TF32, 156 TFLOP/s" in t and "refuses dimensions that are not multiples of 16" in t
    assert "is a floor" in t
    # the 4095^3 figure is printed by the strict model, not typed; the checklist does not say that
    # unaligned shapes lose the tensor cores (cuBLAS 11+ keeps them, slower) or that FP8 runs on CUDA cores
    assert "1.00x" not in t and "tensor-core path is lost" not in t
    nb = json.loads((NB / "04_arithmetic.ipynb").read_text(encoding="utf-8"))
    out = " ".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []))
    assert "NO tensor-core path" not in out
    assert "4095x4095x4095 in bf16" in out and "less efficient kernels" in out
    assert "4104x4104x4104 in fp8_e4m3" in out and "FP8 GEMM refuses it" in out
    assert "against tf32" in out


def test_lesson06_int8_product_bound():
    assert (-128) * (-128) == 16384 == max(abs(a * b) for a in (-128, 127) for b in (-128, 127))
    n = 2 ** 31 // 16384
    assert n * 16384 > 2 ** 31 - 1 and (n - 1) * 16384 <= 2 ** 31 - 1
    assert int(np.iinfo(np.int8).min) == -128
    t = _text("06_quantization.ipynb")
    assert "127 × 127 = 16129, so about 133,000" not in t and "131,072" in t


def test_lesson08_question_matches_its_output():
    nb = json.loads((NB / "08_emulate_a_model.ipynb").read_text(encoding="utf-8"))
    out = " ".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []))
    share = out.split("share of zero weight gradients at steps 0, 1, 2: [")[1].split("]")[0]
    zeros = [float(v) for v in share.split(",")]
    assert zeros[0] == 1.0 and zeros[1] > 0.5                       # step 1 loses most too
    t = _text("08_emulate_a_model.ipynb")
    assert "Why step 0 only?" not in t and "most of them at step 1" in t


def _check_cell(name, marker):
    """The one code cell of lesson ``name`` that starts with ``marker`` (issue 27 item 7: the
    demos are executed cells, with outputs, not markdown blocks to copy)."""
    nb = json.loads((NB / name).read_text(encoding="utf-8"))
    md = [c for c in nb["cells"] if c["cell_type"] == "markdown" and marker in "".join(c["source"])]
    assert md == [], f"{marker!r} is still a markdown block"
    (cell,) = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).startswith(marker)]
    assert "check" in cell["metadata"].get("tags", []) and cell.get("execution_count")
    return "".join(cell["source"]), "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))


def test_lesson05_clipping_needs_unscaled_gradients(capsys):
    """The lesson's cell runs as written: clipping before unscaling acts with threshold 1 / S."""
    from floatfmt import course
    block, committed = _check_cell("05_mixed_precision_training.ipynb", "# check: clipping before unscaling")
    exec(compile(block, "lesson05-clipping", "exec"), {"np": np, "ff": ff, "course": course})  # noqa: S102
    out = capsys.readouterr().out
    assert "clipped before unscaling 1.53e-05" in out and out == committed  # 1 / 2**16, by hand


def test_lesson05_half_weights_and_fp8_logits(capsys):
    from floatfmt import course
    block, committed = _check_cell("05_mixed_precision_training.ipynb", "# check: .half() weights")
    exec(compile(block, "lesson05-half", "exec"), {"np": np, "ff": ff, "course": course})  # noqa: S102
    assert capsys.readouterr().out == committed
    # independently: numpy float16 keeps w where w - 1e-4 is within half an ulp; float32 moves it
    w = np.linspace(0.5, 1.0, 1000).astype(np.float16)
    assert np.all((w - np.float16(1e-4)).astype(np.float16) == w)
    assert np.all(w.astype(np.float32) - np.float32(1e-4) != w.astype(np.float32))
    assert "fp16 (after .half()) 0%, fp32 master copy 100%" in committed


def test_lesson05_per_block_scales_keep_more_small_gradients(capsys):
    from floatfmt import course
    block, committed = _check_cell("05_mixed_precision_training.ipynb", "# check: per-block scales")
    exec(compile(block, "lesson05-mx", "exec"), {"np": np, "ff": ff, "course": course})  # noqa: S102
    assert capsys.readouterr().out == committed and "MXFP8 E4M3" in committed
    # independent of floatfmt's quantize: per-tensor E4M3 through ml_dtypes loses the values below
    # half its smallest subnormal after scaling
    g = course.gradient_sample(4096, seed=1)
    s = np.float32(448 / np.max(np.abs(g)))
    ref = (g * float(s)).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) / float(s)
    assert np.mean(ref == 0) > 0.01
    share = float(committed.split("one scale per tensor")[1].split("become 0:")[1].split("%")[0])
    assert abs(share - 100 * np.mean(ref == 0)) < 0.01


def test_lesson05_default_is_short_and_long_is_a_flag():
    """Issue 27 item 6: a short default, the full-size runs behind ``LONG`` at the top."""
    nb = json.loads((NB / "05_mixed_precision_training.ipynb").read_text(encoding="utf-8"))
    first = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    assert "LONG = False" in first and "progress" in first
    out = " ".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []))
    assert "LONG = False: 64 points, 32 hidden units, 120 steps per run" in out
    assert out.count(" 120 steps, ") == 6                      # the progress line of every run
    t = _text("05_mixed_precision_training.ipynb")
    assert "about five minutes for the six" not in t and "`LONG = True`" in t
    readme = (NB / "README.md").read_text(encoding="utf-8")
    assert "a shorter default is still to do" not in readme and "LONG = True" in readme


def test_lesson05_teaches_the_chapter_topics():
    t = _text("05_mixed_precision_training.ipynb")
    for phrase in ("unscale_(optimizer)", "Do not call `.half()` inside an autocast region",
                   "first and last layers", "MXFP8", "DeepSeek-V3"):
        assert phrase in t, phrase


def _outputs(name):
    nb = json.loads((NB / name).read_text(encoding="utf-8"))
    return " ".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                    for o in c.get("outputs", []))


def test_lesson09_fp16_range_facts_from_numpy():
    """The FP16 facts lesson 09 states, from numpy's float16 (not floatfmt)."""
    h = np.finfo(np.float16)
    assert float(h.smallest_subnormal) == 2.0 ** -24 and f"{float(h.smallest_subnormal):.2g}" == "6e-08"
    assert float(np.float16(2.0 ** -25)) == 0.0 and float(h.max) == 65504.0
    assert float(np.float16(2.0 ** -16 / 32)) == 2.0 ** -21              # the logits' gradient survives
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(256.0) * np.float16(256.0))           # 256**2 = 65536 > 65504
        assert np.isinf(np.float16(np.exp(11.1))) and np.isfinite(np.float16(np.exp(11.08)))
    assert 11.08 < np.log(65504.0) < 11.09 < np.log(65520.0) < 11.1     # "past about 11.09"
    t = _text("09_conv_net_fp16.ipynb")
    assert "2**-24 ≈ 6.0e-8" in t and "below half of it (2**-25) rounds to 0" in t
    assert "past about 11.09, `ln(65504)`" in t and "activations of 256 or more" in t


def test_lesson09_prose_matches_its_outputs():
    t, out = _text("09_conv_net_fp16.ipynb"), _outputs("09_conv_net_fp16.ipynb")
    for layer in ("stem", "block.conv1", "block.conv2"):                # "every weight gradient ... is 0"
        assert f"{layer:<12} weight-gradient elements that are exactly 0: 100.0%" in out
    head = float(out.split("head         weight-gradient elements that are exactly 0:")[1].split("%")[0])
    assert head < 10 and "Only the head's gradient survives (nearly all of it)" in t
    steps = out.split("at steps [")[1].split("]")[0]
    skipped = [int(s) for s in steps.split(",")]
    assert skipped[:5] == [0, 1, 2, 3, 4] and 5 not in skipped and "five times in a row" in t
    assert "and again whenever a later gradient overflows" in t and len(skipped) > 5
    share = float(out.split("convolutions' share of the emulated GEMM FLOPs:")[1].split("%")[0])
    assert share > 99 and "The convolutions are nearly all of the work" in t
    assert "channels whose variance is Inf: 8 of 8" in out and "is 0 everywhere" in t
    assert "implicit GEMM by hand == emulated conv2d: True" in out
    assert "all claims hold" in out


def test_lesson09_gradscaler_defaults_are_torchs():
    """'2**16, GradScaler's default', 'x0.5 on overflow, x2 every 2000 clean steps': torch's own
    signature and floatfmt's LossScaler agree."""
    import inspect
    torch = pytest.importorskip("torch")
    p = inspect.signature(torch.amp.GradScaler).parameters
    assert p["init_scale"].default == 2.0 ** 16 and p["growth_interval"].default == 2000
    assert p["backoff_factor"].default == 0.5 and p["growth_factor"].default == 2.0
    ls = ff.LossScaler()
    assert (ls.get_scale(), ls.growth_interval, ls.backoff_factor, ls.growth_factor) == (2.0 ** 16, 2000, 0.5, 2.0)
    code = _text("09_conv_net_fp16.ipynb", "code")
    assert "x0.5 on overflow, x2 every 2000 clean steps" in code
    assert "(here 2**16, GradScaler's default)" in _text("09_conv_net_fp16.ipynb")
