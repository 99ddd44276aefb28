"""Assignments 12-17: tensor-core accumulation, stochastic rounding, INT8 zero
point, an MX block with an outlier, FP8 delayed scaling, emulating a layer.
Each checker recomputes the answer with floatfmt for the student's parameters
and names the usual mistake when it recognises it."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..core.cast import cast
from ..arith.accumulate import matmul
from ..training.delayed_scaling import DelayedScaling
from ..scaling.quantize import quantize
from ..arith.matrixunit.tensorcore import get_model
from .registry import Exercise, Wrong, register
from ._builtin import answer_fraction

__all__ = ["probe_vectors", "sr_values", "zp_data", "mx_outlier_block", "amax_history", "layer_data"]


def _numbers(answer, n, what):
    try:
        vals = list(answer) if isinstance(answer, (list, tuple, np.ndarray)) else [answer]
    except TypeError:
        vals = [answer]
    if len(vals) != n:
        raise Wrong(f"Give {n} {what}.")
    return [answer_fraction(v) for v in vals]


# ----------------------------------------------------------------------------- 12 tensor-core probe
def probe_vectors(d: int, pos: int):
    """a, b of length max(pos + 1, 3) with products 1, 2^-d, 0, ..., and -1 at index ``pos``."""
    n = max(pos + 1, 3)
    a, b = np.zeros(n), np.ones(n)
    a[0], a[1], b[1], a[pos] = 1.0, 2.0 ** -(d // 2), 2.0 ** -(d - d // 2), -1.0
    return a, b


def _probe(model, fmt, d, pos):
    a, b = probe_vectors(d, pos)
    return float(matmul(a[None, :], b[:, None], fmt, model=model)[0, 0])


def _ex_tc_probe(answer, model="h100", fmt="bf16", ds=(20, 24, 26), same_block=True):
    """Results of the probe a.b (products 1, 2^-d and -1) on a tensor-core model, for each d
    in ``ds``: the -1 sits in the same block of L products (``same_block``) or in the next."""
    m = get_model(model, fmt)
    pos = 2 if same_block else m.L
    right = [_probe(model, fmt, d, pos) for d in ds]
    got = _numbers(answer, len(ds), "results, one per d")
    if [Fraction(r) for r in right] == got:
        return (f"{[f'{r:g}' for r in right]}: the block's products are aligned to the largest and cut to "
                f"F = {m.F} fraction bits" + ("" if same_block else
                                              ", and between blocks the sum is an fp32 number (23 bits)") + ".")
    exact = [Fraction(2) ** -d for d in ds]
    if got == exact:
        raise Wrong("That is the exact result; the unit truncates the small product when it is aligned "
                    "to the large one. How many fraction bits does this model keep (F)?")
    if not same_block and got == [Fraction(2) ** -d if d <= m.F else 0 for d in ds]:
        raise Wrong(f"The -1 is in the next block of L = {m.L} products: between blocks the running sum is "
                    "an fp32 number.")
    raise Wrong("The small term survives exactly when it is not cut off by the alignment: compare d with "
                "the bits kept.")


def _tc_variant(rng):
    model, fmt = [("h100", "bf16"), ("a100", "bf16"), ("v100", "fp16"), ("a100", "tf32"), ("h100", "fp16")][
        int(rng.integers(5))]
    ds = tuple(sorted(int(v) for v in rng.choice(np.arange(19, 28), 3, replace=False)))
    return {"model": model, "fmt": fmt, "ds": ds, "same_block": bool(rng.integers(2))}


# ----------------------------------------------------------------------------- 13 stochastic rounding
def sr_values(seed=1, n=5) -> np.ndarray:
    """``n`` values between 1 and 4 that are not bf16 values (seeded)."""
    return np.random.default_rng(seed).uniform(1.0, 4.0, n)


def _ex_sr_moments(answer, fmt="bf16", seed=1, n=5):
    """(E, Var) of the exact sum of sr_values(seed, n), each rounded stochastically to ``fmt``."""
    x = sr_values(seed, n)
    lo, hi = cast(x, fmt, rounding="down"), cast(x, fmt, rounding="up")
    e = sum(Fraction(float(v)) for v in x)
    var = sum((Fraction(float(v)) - Fraction(float(a))) * (Fraction(float(b)) - Fraction(float(v)))
              for v, a, b in zip(x, lo, hi))
    ge, gv = _numbers(answer, 2, "numbers: (expected value, variance)")
    ok = lambda g, r: abs(g - r) <= abs(r) * Fraction(1, 10 ** 9)  # noqa: E731
    if ok(ge, e) and ok(gv, var):
        return (f"E = {float(e)!r} (the exact sum: stochastic rounding is unbiased), Var = {float(var):.6g} = "
                "sum of (x - lo)(hi - x) over the values.")
    if ok(ge, sum(Fraction(float(v)) for v in cast(x, fmt))):
        raise Wrong("That expected value is the sum of the values rounded to nearest: stochastic rounding's "
                    "expected value is the unrounded value.")
    if not ok(ge, e):
        raise Wrong("The expected value is wrong: E[SR(x)] = lo + (x - lo) = x for each value.")
    if gv == 0:
        raise Wrong("The variance is not 0: each value rounds up with probability (x - lo)/(hi - lo).")
    raise Wrong("The variance is wrong: one value is a two-point variable (lo or hi); the values are "
                "independent, so the variances add.")


# ----------------------------------------------------------------------------- 14 INT8 zero point
def zp_data(seed=1, n=64) -> np.ndarray:
    """``n`` activations in [lo, hi] with lo < 0 < hi, |lo| much smaller than hi."""
    rng = np.random.default_rng(seed)
    lo, hi = -rng.uniform(0.05, 0.5), rng.uniform(1.0, 6.0)
    x = rng.uniform(lo, hi, n)
    x[0], x[1] = lo, hi
    return x


def _ex_int8_zero_point(answer, seed=1, probe=0.0):
    """(zero point, code of ``probe``) of uint8 asymmetric per-tensor quantisation of zp_data(seed)."""
    x = zp_data(seed)
    q = quantize(x, "uint8", scheme="asymmetric")
    code = int(quantize(np.r_[x, probe], "uint8", scheme="asymmetric", scale=q.scale,
                        zero_point=q.zero_point).codes[-1])
    z = int(q.zero_point)
    gz, gc = _numbers(answer, 2, "integers: (zero point, code)")
    if gz == z and gc == code:
        return (f"zero point {z}, scale (max - min)/255 = {float(q.scale):.6g}: the code {z} stands for exactly "
                "0.0, so zero padding and ReLU zeros are stored without error.")
    if gz == -z:
        raise Wrong("Check the sign: the zero point is the code of 0.0, so z = round(-min / scale).")
    if gz != z:
        raise Wrong("zero point = round(-min / scale), clamped to 0..255, with scale = (max - min) / 255.")
    raise Wrong("The zero point is right; the code is round(x / scale) + zero point, clamped to 0..255.")


# ----------------------------------------------------------------------------- 15 MX block with an outlier
def mx_outlier_block(seed=1, outlier=40.0) -> np.ndarray:
    """32 values with standard deviation 0.5 and one outlier of magnitude ``outlier``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.5, 32)
    x[int(rng.integers(32))] = outlier * rng.choice([-1.0, 1.0])
    return x


def _ex_mx_outlier(answer, seed=1, outlier=40.0, fmt="mxfp4_e2m1"):
    """(E8M0 scale code, number of nonzero inputs that become 0) of the block in ``fmt``."""
    x = mx_outlier_block(seed, outlier)
    q = quantize(x, fmt)
    code = int(q.scale_codes[0])
    flushed = int(np.sum((q.dequantize() == 0) & (x != 0)))
    gc, gf = _numbers(answer, 2, "integers: (scale code, flushed count)")
    if gc == code and gf == flushed:
        return (f"scale code {code}: the outlier sets the shared exponent, and {flushed} of 32 values are "
                "below half the smallest element step and become 0.")
    if gc != code:
        raise Wrong("The scale: shared exponent = floor(log2 amax) - emax of the element format, code = E + 127.")
    raise Wrong("The scale is right. Count the values whose |v| / 2^E is below half the smallest positive "
                "element value (ties go to the even 0).")


# ----------------------------------------------------------------------------- 16 FP8 delayed scaling
def amax_history(seed=1, steps=10) -> np.ndarray:
    """Per-step amax of a tensor: around 2, with one jump to 20-60 somewhere in the middle."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(1.5, 2.5, steps)
    a[int(rng.integers(3, steps - 2))] = rng.uniform(20, 60)
    return a


def _ex_delayed_scaling(answer, seed=1, history_len=4, algo="max", fmt="fp8_e4m3"):
    """(scale in force at the last step, number of steps at which values saturated) when a
    tensor x_t = amax_t * [-1, ..., 1] is cast with DelayedScaling(history_len, algo)."""
    amax = amax_history(seed)
    ds = DelayedScaling(history_len=history_len, algo=algo, fwd_format=fmt)
    clipped, scale = 0, None
    for a in amax:
        scale = ds.scale("t")
        ds.quantize("t", a * np.linspace(-1, 1, 9))
        clipped += ds.clip_fraction["t"] > 0
        ds.update()
    gs, gk = _numbers(answer, 2, "numbers: (scale at the last step, steps that saturated)")
    if abs(gs - Fraction(float(scale))) <= Fraction(float(scale)) * Fraction(1, 10 ** 6) and gk == clipped:
        return (f"scale {float(scale):.6g} at the last step, {clipped} step(s) saturated: the scale comes "
                "from earlier steps' amax, so a jump saturates the step it happens in.")
    if gk != clipped:
        raise Wrong("Count the steps whose amax exceeds what the scale in force allows (448 x scale); the "
                    "first step uses scale 1.")
    raise Wrong(f"The scale at a step = max of the last {history_len} recorded amax values / 448 "
                f"({algo!r}), computed before that step's own amax is recorded.")


# ----------------------------------------------------------------------------- 17 emulating a layer
def layer_data(seed=1):
    """x (4 x 16), W (16 x 8), b (8): a small dense layer's inputs (float64)."""
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1, (4, 16)), rng.normal(0, 0.3, (16, 8)), rng.normal(0, 0.1, 8)


def _layer(x, W, b, fmt, model):
    acc = matmul(x, W, fmt, model=model) if model else matmul(x, W, fmt, acc_fmt="fp32")
    h = cast(cast(acc, fmt) + cast(b, fmt), fmt)     # output in fmt; bias added in fmt (one rounding)
    return np.maximum(h, 0.0)


def _ex_emulate_layer(answer, seed=1, fmt="bf16", model=None):
    """relu(fmt(fmt(x @ W) + fmt(b))) with x, W rounded to ``fmt`` and the product accumulated
    in fp32 (or on the tensor-core ``model``): the 4 x 8 output, bit for bit."""
    x, W, b = layer_data(seed)
    right = _layer(x, W, b, fmt, model)
    try:
        got = np.asarray(answer, dtype=np.float64)
    except (TypeError, ValueError):
        raise Wrong("Give the 4 x 8 output as an array.") from None
    if got.shape != right.shape:
        raise Wrong(f"The output has shape {right.shape}, not {got.shape}.")
    if np.array_equal(got, right):
        ref = np.maximum(x @ W + b, 0)
        return (f"bit for bit. Largest difference from float64: {np.max(np.abs(right - ref)):.3g}.")
    if np.array_equal(got, np.maximum(x @ W + b, 0)):
        raise Wrong("That is the float64 layer: round x, W and b to the format first.")
    if np.array_equal(got, np.maximum(cast(cast(x, fmt) @ cast(W, fmt) + cast(b, fmt), fmt), 0)):
        raise Wrong("Close: the product must be accumulated in fp32 with one rounding per add (ff.matmul), "
                    "not in float64.")
    n = int(np.sum(got != right))
    raise Wrong(f"{n} of {right.size} outputs differ: inputs to {fmt}, matmul with fp32 accumulation, "
                f"product to {fmt}, bias added in {fmt}, then ReLU.")


for _ex in [
    Exercise("tensorcore-probe", _ex_tc_probe, "predict a tensor-core probe", 2.0,
             {"model": "h100", "fmt": "bf16", "ds": (20, 24, 26), "same_block": True}, _tc_variant,
             {"model": ("h100", "a100", "v100", "b200", "ada"), "fmt": ("bf16", "fp16", "tf32")},
             ("Products are aligned to the block's largest and cut to F fraction bits.",)),
    Exercise("sr-sum-moments", _ex_sr_moments, "stochastic rounding of a sum", 1.0, {"fmt": "bf16"},
             lambda rng: {"seed": int(rng.integers(1, 10 ** 6)), "fmt": ("bf16", "fp16")[int(rng.integers(2))]},
             {"fmt": ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2")}, ("Each value is a two-point variable.",)),
    Exercise("int8-zero-point", _ex_int8_zero_point, "INT8 asymmetric zero point", 1.0, {},
             lambda rng: {"seed": int(rng.integers(1, 10 ** 6)), "probe": round(float(rng.uniform(-0.05, 1)), 3)},
             {}, ("z = round(-min / scale).",)),
    Exercise("mx-outlier", _ex_mx_outlier, "an MX block with an outlier", 1.0, {},
             lambda rng: {"seed": int(rng.integers(1, 10 ** 6)), "outlier": float(rng.integers(10, 200))},
             {"fmt": ("mxfp4_e2m1", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3", "mxfp8_e5m2")},
             ("The outlier sets the block's exponent.",)),
    Exercise("fp8-delayed-scaling", _ex_delayed_scaling, "FP8 delayed scaling", 1.0, {},
             lambda rng: {"seed": int(rng.integers(1, 10 ** 6)), "history_len": int(rng.integers(2, 6)),
                          "algo": ("max", "most_recent")[int(rng.integers(2))]},
             {"algo": ("max", "most_recent"), "fmt": ("fp8_e4m3", "fp8_e5m2")},
             ("The scale in force comes from earlier steps.",)),
    Exercise("emulate-layer", _ex_emulate_layer, "emulate a bf16 layer bit for bit", 2.0, {},
             lambda rng: {"seed": int(rng.integers(1, 10 ** 6)), "fmt": ("bf16", "fp16")[int(rng.integers(2))]},
             {"fmt": ("bf16", "fp16"), "model": (None, "a100", "h100")},
             ("Round inputs first; accumulate in fp32.",)),
]:
    register(_ex)
