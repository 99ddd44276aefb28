"""The tiny mixed-precision training loop: the outcomes each precision policy must show."""

import io

import numpy as np
import pytest

import floatfmt as ff
from floatfmt import cli
from floatfmt.training.loop import POLICIES, _Run, cli_train, summary_table, train

STEPS = 300
RUNS = ("fp32", "tf32", "bf16", "fp16", "fp16_no_scaling", "fp16_no_master", "fp8")
#: The outcome runs use half the lesson's spiral points (half the GEMM work of every step:
#: the fixture was the suite's costliest item) and half its loss weight, so the per-point
#: logit gradient, (p - y) * loss_weight * scale / n_points, where FP16 loses the
#: gradients, is the same as in the default run; the learning rate is unchanged.
SMALL = dict(n_points=128, loss_weight=2.0 ** -17)


@pytest.fixture(scope="module")
def runs():
    return {name: train(name, STEPS, **SMALL) for name in RUNS}


def anneal_gain(r):
    """Relative loss decrease over the annealing phase (small learning rate)."""
    a = r.anneal_step
    return 1 - r.loss[-1] / r.loss[a]


def test_fp32_tf32_bf16_reach_high_accuracy(runs):
    for name in ("fp32", "tf32", "bf16"):
        r = runs[name]
        assert r.final_accuracy >= 0.97, name
        assert r.final_loss < 0.05, name
        assert not r.skipped.any() and not r.overflow.any()
    # BF16 has fp32's exponent range: the same tiny gradients never underflow
    assert runs["bf16"].underflow.max() == 0.0


def test_fp16_with_dynamic_loss_scaling_matches_fp32(runs):
    r, ref = runs["fp16"], runs["fp32"]
    assert r.final_accuracy >= 0.97
    assert abs(r.final_loss - ref.final_loss) < 0.005
    assert np.mean(r.underflow) < 0.02
    # growth_interval=100 and no overflow: the scale doubles every 100 steps
    assert r.loss_scale.tolist() == [65536.0] * 100 + [131072.0] * 100 + [262144.0] * 100


def test_fp16_without_loss_scaling_loses_gradients(runs):
    r = runs["fp16_no_scaling"]
    assert np.mean(r.underflow) > 0.5  # measured 0.59: most gradient values flush to zero
    assert np.mean(r.underflow[:50]) > 0.8  # early on, when the model trains, 0.88
    assert r.final_accuracy < 0.9
    assert r.final_loss > 10 * runs["fp16"].final_loss
    assert (r.loss_scale == 1.0).all()


def test_fp16_without_master_weights_stalls(runs):
    r, ref = runs["fp16_no_master"], runs["fp16"]
    a = r.anneal_step
    # while the learning rate is annealed, the updates are below half an fp16 ulp
    assert r.frozen > 0.7 and ref.frozen < 0.01
    assert np.mean(r.lost_updates[a:]) > 0.6 and np.mean(ref.lost_updates[a:]) < 0.01
    # so the fp16 weights stop moving and the loss stops improving; the master copy goes on
    assert anneal_gain(r) < 0.02
    assert anneal_gain(ref) > 0.05


def test_fp8_with_per_tensor_scaling_trains(runs):
    r = runs["fp8"]
    assert r.final_accuracy >= 0.95
    assert r.final_loss < 0.1
    assert r.underflow.max() == 0.0  # E5M2 gradients with delayed scaling do not flush


def test_summary_and_table(runs):
    s = runs["fp16_no_master"].summary()
    assert "never moved" in s and "fp16_no_master" in s
    t = summary_table(runs)
    assert t.count("\n") == len(RUNS) + 1 and "fp16_no_scaling" in t


def test_deterministic_and_seeded():
    kw = dict(steps=12, n_points=64, hidden=16)
    a, b = train("fp8", **kw), train("fp8", **kw)
    for field in ("loss", "accuracy", "underflow", "loss_scale", "lost_updates"):
        assert np.array_equal(getattr(a, field), getattr(b, field), equal_nan=True)
    c = train("fp8", seed=1, **kw)
    assert not np.array_equal(a.loss, c.loss)


def test_overflow_backs_off_and_skips():
    r = train("fp16", steps=12, n_points=64, hidden=16, init_scale=2.0 ** 40)
    k = int(np.argmin(r.skipped))  # first step that was not skipped
    assert k > 0 and r.skipped[:k].all() and not r.skipped[k:].any()
    assert r.loss_scale[:k + 1].tolist() == [2.0 ** (40 - i) for i in range(k + 1)]
    assert np.isnan(r.lost_updates[:k]).all()  # no update happened on a skipped step
    static = train("fp16_static", steps=3, n_points=64, hidden=16, init_scale=2.0 ** 40)
    assert static.skipped.all() and (static.loss_scale == 2.0 ** 40).all()


def test_low_precision_accumulator_rounds_every_block():
    """fp16_acc16 runs the H100 unit with an fp16 accumulator: each 16-product step is
    rounded to fp16 (nearest-even), so 47 products of 2**-16 after a 1 are swamped (each
    step adds 1/4 of an fp16 ulp at most), where the fp32 accumulator keeps them."""
    run = _Run(POLICIES["fp16_acc16"], None, acc_block=16)
    assert run.model == "h100"
    e = 2.0 ** -16
    A = np.ones((1, 48))
    B = np.r_[1.0, [e] * 47][:, None]
    assert run._accumulate(A, B, "fp16")[0, 0] == 1.0
    wide = _Run(POLICIES["fp16"], None, acc_block=16)
    assert wide._accumulate(A, B, "fp16")[0, 0] == 1.0 + 47 * e  # exact in fp32
    assert wide.matmul(A, B, wide.act, wide.act, wide.act, wide.act, wide.act,
                       None, None, None, None)[0, 0] == 1.0 + 2.0 ** -10  # fp16 output
    r = train("bf16", steps=6, n_points=64, hidden=16, acc="bf16")
    assert r.policy.name == "bf16+acc_bf16" and r.policy.acc == "bf16"
    assert r.policy.model is None  # no H100 bf16 unit has a bf16 accumulator: sequential


@pytest.mark.parametrize("name", ["bf16", "fp16_acc16", "tf32", "fp32", "fp8"])
def test_training_matmuls_are_ff_matmul_with_the_policy_model(name):
    """Every forward and backward matmul of a training step is ``ff.matmul`` with the
    policy's accumulation model (tensor-core preset, or the sequential accumulator),
    then one rounding to the output format; the model changes the bits."""
    p = POLICIES[name]
    rng = np.random.default_rng(7)
    a = rng.standard_normal((40, 37))
    b = rng.standard_normal((37, 24)) * 2.0 ** -9
    run = _Run(p, ff.DelayedScaling() if run_fp8(p) else None, acc_block=16)
    out = run.act
    got = run.matmul(a, b, out, run.mm_fwd, run.mm_fwd, None, None, "a", "w", "forward",
                     "forward")
    if run_fp8(p):  # E4M3 values, per-tensor scales in the fp32 epilogue
        qa, qb = (ff.quantize(v, "fp8_e4m3", scale=1.0) for v in (a, b))
        A, B = np.asarray(qa.elements), np.asarray(qb.elements)
        alpha = float(ff.cast(float(qa.scale) * float(qb.scale), "fp32"))
        want = ff.matmul(A, B, "fp16", acc_fmt=p.acc, alpha=alpha)
        assert alpha == 1.0  # the first step's delayed scales are 1
    else:
        fmt = p.matmul
        A, B = ff.cast(a, fmt), ff.cast(b, fmt)
        want = ff.matmul(A, B, fmt, acc_fmt=p.acc, model=p.model)
        if p.model is not None:  # the model matters: a sequential accumulator differs
            seq = ff.matmul(A, B, fmt, acc_fmt=p.acc)
            assert (seq != want).sum() > 10
    want = ff.cast(want, out)
    assert np.array_equal(got, want)


def run_fp8(p):
    return p.matmul.startswith("fp8")


def test_cli_train_prints_progress_and_summary():
    out = io.StringIO()
    r = cli_train("bf16", 5, stream=out)
    text = out.getvalue()
    assert "5/5" in text and "policy       bf16" in text and "final" in text
    assert len(r.loss) == 5


def test_errors(capsys):
    with pytest.raises(ValueError, match="fp16_no_master"):
        train("fp16_nomaster")
    with pytest.raises(ValueError, match="steps"):
        train("fp32", steps=0)
    with pytest.raises(TypeError):
        train(3)
    assert cli.main(["train", "--policy", "fp9"]) == 2
    assert "unknown policy" in capsys.readouterr().err


def test_mx_policy_blocks_each_gemm_along_its_reduction_axis():
    """The MX policy's three matmuls use operands blocked along the GEMM's reduction
    axis (floatfmt.training.mx_gemms), then the sequential fp32 accumulator; blocking the weights
    once along their last axis (one-axis MX) gives other grad-input results."""
    from floatfmt.training.mx_gemms import mx_gemm_operands
    run = _Run(POLICIES["mxfp8"], None, acc_block=16)
    rng = np.random.default_rng(3)
    scale = lambda n: 2.0 ** rng.integers(-8, 9, n)  # noqa: E731
    h = rng.standard_normal((48, 40)) * scale(40)  # M x K activations
    W = rng.standard_normal((40, 36)) * scale(36)  # K x N, as the loop stores it
    d = rng.standard_normal((48, 36)) * scale(36)  # M x N gradients
    out = run.act
    deq = lambda q: q.dequantize()  # noqa: E731
    qx, qw = mx_gemm_operands("forward", h, W.T)
    want = {"forward": (deq(qx), deq(qw).T)}
    qd, qx = mx_gemm_operands("grad_weight", d, h)
    want["grad_weight"] = (deq(qx).T, deq(qd))
    qd, qw = mx_gemm_operands("grad_input", d, W.T)
    want["grad_input"] = (deq(qd), deq(qw))
    args = {"forward": (h, W), "grad_weight": (h.T, d), "grad_input": (d, W.T)}
    for gemm, (a, b) in args.items():
        got = run.matmul(a, b, out, None, None, None, None, "a", "b", None, None, gemm=gemm)
        A, B = want[gemm]
        assert np.array_equal(got, ff.cast(ff.matmul(A, B, "fp32", acc_fmt="fp32"), out)), gemm
    one_axis_w = ff.fake_quant(W.T, "mxfp8_e4m3", axis=1)  # W blocked along K only
    wrong = ff.cast(ff.matmul(want["grad_input"][0], one_axis_w, "fp32", acc_fmt="fp32"), out)
    got = run.matmul(d, W.T, out, None, None, None, None, "d", "w", None, None, gemm="grad_input")
    assert (wrong != got).sum() > got.size // 10  # 23% after the rounding to bf16
    with pytest.raises(ValueError, match="GEMM"):
        run.matmul(h, W, out, None, None, None, None, "a", "w", None, None)


def test_mx_policy_trains():
    r = train("mxfp8", STEPS, **SMALL)
    assert r.final_accuracy >= 0.97 and r.final_loss < 0.1
    assert r.underflow.max() == 0.0 and not r.skipped.any()
