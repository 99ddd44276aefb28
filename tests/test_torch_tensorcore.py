"""The tensor-core models on the device path (``floatfmt.arith.matrixunit.tensorcore``,
``tfdpa``, ``fdpa`` and ``gemm`` on tensors, what CUDA tensors run), forced on CPU tensors with
``force_namespace``, equal the numpy kernels element for element (NaN by class, the
sign of zero counted) for EVERY preset of ``ff.tensorcore_models()``: ``matmul`` and
``dot`` with and without the epilogue (alpha, beta, c, out_fmt, directed roundings,
overflow, ftz, daz), ``mma``, and ``block_scaled_mma`` for the block-scaled presets.  The data has zeros of both signs, Inf and NaN,
subnormal inputs of the input format, values past its range, exponent spreads over the
whole range, exact and near cancellation, and fp32 ties decided by a tiny term; shapes
are batched, broadcast, 1-D, K not a multiple of L, and K = 0.

A registered preset the device cannot run must raise NotImplementedError naming it:
``test_every_preset_runs_on_the_device`` loops over the registry itself, so a preset
added later is covered (or fails) without editing this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.backend.dispatch import force_namespace
from floatfmt.arith.matrixunit.tensorcore import TensorCoreModel, block_scaled_mma, get_model
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

PRESETS = sorted(ff.tensorcore_models())
MATMUL_PRESETS = [p for p in PRESETS if ff.tensorcore_models()[p].block_fmt is None]


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _seed(name: str) -> int:
    return int.from_bytes(name.encode(), "little") % 2 ** 32


def operands(fmt: str, shape: tuple, rng, spread: str) -> np.ndarray:
    """Random float64 operands for inputs of ``fmt``.  ``spread`` "wide": exponents from
    below the format's subnormals up to its top (at most 2**+-60, so that sums of
    products stay in the fp32 range: the overflow cases come from ``sprinkle``);
    "narrow": within a few binades (many exact sums, ties and cancellations)."""
    f = ff.get_format(fmt)
    if f.kind == "int":
        x = rng.integers(-150, 151, shape).astype(np.float64)
        x.reshape(-1)[::5] += 0.5  # ties of the cast
        return x
    lo, hi = ((max(f.emin - f.mbits - 2, -60), min(f.emax - 1, 60)) if spread == "wide"
              else (-3, 3))
    return rng.choice([-1.0, 1.0], shape) * (1 + rng.random(shape)) * np.exp2(
        rng.integers(lo, hi + 1, shape).astype(np.float64))


def sprinkle(view: np.ndarray, fmt: str, rng) -> None:
    """Put zeros of both signs, Inf, NaN, subnormals of fmt, its largest value and a
    value past it at random places of ``view`` (a view of an operand), in place."""
    f = ff.get_format(fmt)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, f.smallest_subnormal * 3, -f.max,
            -f.smallest_subnormal, f.max * 1.5]
    at = rng.choice(view.size, min(len(vals), view.size), replace=False)
    view[np.unravel_index(at, view.shape)] = vals[:view.size]


def cancel(a: np.ndarray, b: np.ndarray, rng) -> None:
    """Exact and near cancellation: products k and k+1 of row 0 / column 0 negate each
    other exactly (even k) or up to a few low bits, in place."""
    K = a.shape[-1]
    for k in range(0, K - 1, 2):
        a[..., 0, k + 1] = a[..., 0, k]
        b[k + 1, 0] = -b[k, 0] * (1.0 if k % 4 == 0 else 1 + 2.0 ** -int(rng.integers(2, 9)))


def ties(fmt: str, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Batched (P, 1, K) by (P, K, 1) products whose sums are fp32 ties (around a base
    B = 2**eB: B (1 + 2**-23) + B 2**-24 ...) decided, or not, by one tiny product a few
    bits below or at the format's smallest product (below float64's reach of B where the
    format's range allows), placed so that the tie and its
    tiebreak fall in one step or in two, whatever the model's L (2 ... 32)."""
    f = ff.get_format(fmt)
    top, bottom = 2 * f.emax, 2 * (f.emin - f.mbits)  # exponents of the products
    eB = min(top - 1, 100)  # as far above the smallest product as fp32's range allows
    patterns = []
    for odd in (0, 1):
        for tb in (eB - 26, max(eB - 29, bottom), bottom):
            for sign in (1, -1, 0):
                p = [(1, eB), None] + [(1, eB - 23)] * odd + [(1, eB - 24), (sign, tb)]
                patterns.append(p)
                patterns.append([None] * 3 + p)  # shifted across the block boundaries
    a = np.zeros((2 * len(patterns), 1, K))
    b = np.zeros((2 * len(patterns), K, 1))
    for i, p in enumerate(patterns):
        for k, term in enumerate(p):
            if term is not None and term[0] != 0:
                e = term[1]
                a[2 * i, 0, k] = 2.0 ** -(-e // 2)
                b[2 * i, k, 0] = term[0] * 2.0 ** (e + (-e // 2))
        a[2 * i + 1], b[2 * i + 1] = -a[2 * i], b[2 * i]  # the negated sum
    return a, b


def check(got, want):
    assert isinstance(got, torch.Tensor), type(got)
    assert got.dtype == torch.float64 and got.device.type == "cpu"
    w = np.asarray(want, np.float64)
    assert tuple(got.shape) == w.shape, (tuple(got.shape), w.shape)
    n = int(mismatches(got.numpy(), w).sum())
    assert n == 0, f"{n} of {w.size} elements differ"


def both(fn, *arrays, **kw):
    """fn on the numpy arrays, and on them as CPU tensors through the device code."""
    want = fn(*arrays, **kw)
    tensors = [torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
               for v in arrays]
    kw = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    with force_namespace():
        got = fn(*tensors, **kw)
    return got, want


# epilogue variants, cycled over the data cases: (alpha, beta, c?, out_fmt, options)
EPILOGUES = [
    (1.0, None, False, None, {}),
    (0.75, None, False, "bf16", {}),
    (1.0, None, True, None, {}),
    (-3.0, 0.5, True, "fp16", {"rounding": "toward_zero"}),
    (1.5, 2.0, True, "fp8_e4m3", {"rounding": "up", "overflow": "saturate"}),
    (1.0, 1.0, True, "bf16", {"rounding": "down", "ftz": True, "daz": True}),
]


def cases(fmt: str, rng):
    """(a, b) pairs: batched with broadcasting, K = 37 / 70 (not multiples of any L),
    1-D operands, K = 0, ties and cancellation."""
    out = []
    floating = ff.get_format(fmt).kind == "float"
    for spread, specials, sa, sb in (("narrow", False, (2, 3, 37), (37, 5)),
                                     ("wide", False, (2, 1, 4, 70), (3, 70, 3)),
                                     ("wide", True, (3, 37), (37, 4)),
                                     ("narrow", True, (2, 4, 70), (70, 3))):
        a, b = operands(fmt, sa, rng, spread), operands(fmt, sb, rng, spread)
        if specials and floating:  # in row 0 of a and column 1 of b only
            sprinkle(a[..., 0, :], fmt, rng)
            sprinkle(b[..., :, 1], fmt, rng)
        if spread == "narrow" and not specials and floating:
            cancel(a, b, rng)
        out.append((a, b))
    out.append((out[0][0][0, 0], out[0][1]))  # 1-D by 2-D
    out.append((out[2][0], out[2][1][:, 0]))  # 2-D by 1-D
    if floating:
        out.append(ties(fmt, 37))  # (index 6: the first, plain, epilogue below)
    out.append((np.ones((2, 0)), np.ones((0, 3))))  # K = 0
    return out


def _model_fmt(preset: str) -> str:
    return ff.tensorcore_models()[preset].fmt


def _c_for(shape, fmt: str, rng, int_model: bool):
    """An accumulator / epilogue input: fp32-range values, or integers for int8 models."""
    c = operands("fp32" if not int_model else "int8", shape, rng, "narrow")
    return np.round(c) * 2 ** 20 if int_model else c


@pytest.mark.parametrize("preset", MATMUL_PRESETS)
def test_matmul_and_dot_equal_numpy(preset):
    fmt = _model_fmt(preset)
    rng = np.random.default_rng(_seed(preset))
    int_model = fmt == "int8"
    for i, (a, b) in enumerate(cases(fmt, rng)):
        alpha, beta, with_c, out_fmt, opts = EPILOGUES[i % len(EPILOGUES)]
        if int_model:
            opts = {k: v for k, v in opts.items() if k == "rounding"}
        kw = dict(model=preset, alpha=alpha, beta=beta, out_fmt=out_fmt, **opts)
        if with_c:
            shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
            kw["c"] = _c_for(shape[-1:] if i % 2 else shape, fmt, rng, int_model)
        check(*both(ff.matmul, a, b, fmt, **kw))
    a, b = cases(fmt, rng)[2]
    check(*both(ff.dot, a, b.T[:3], fmt, model=preset))  # leading axes broadcast
    check(*both(ff.dot, a[0], b[:, 0], fmt, model=preset, alpha=2.0, c=1.25,
                out_fmt="bf16"))  # 1-D: a 0-d result


@pytest.mark.parametrize("preset", MATMUL_PRESETS)
def test_mma_equals_numpy(preset):
    fmt = _model_fmt(preset)
    rng = np.random.default_rng(_seed(preset) + 1)
    int_model = fmt == "int8"
    accs = ["fp32"]
    try:
        get_model(preset, fmt, "fp16")
        if not int_model:
            accs.append("fp16")
    except ValueError:
        pass
    for i, (a, b) in enumerate(cases(fmt, rng)[:4] + cases(fmt, rng)[6:7]):
        if a.ndim < 2 or b.ndim < 2:
            continue
        shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
        c = _c_for(shape[-2:] if i % 2 else shape, fmt, rng, int_model)
        if not int_model and i == 2:
            c.reshape(-1)[:4] = [np.inf, -0.0, np.nan, 2.0 ** -130]
        for acc in accs:
            check(*both(ff.mma, a, b, c, fmt, preset, acc))
    if not int_model:
        check(*both(ff.mma, *cases(fmt, rng)[0], 0.5, fmt, preset))  # a scalar c
    else:  # sums past the int32 range wrap around
        a = np.array([[100.0, 100.0], [-100.0, -100.0]])
        c = np.array([[2.0 ** 31 - 1, -(2.0 ** 31)], [-(2.0 ** 31), 2.0 ** 31 - 1]])
        check(*both(ff.mma, a, a.T, c, fmt, preset))


# custom models through the same code: every c entry, tf32 operand rule, overflow and
# zero-exponent floor a TensorCoreModel can hold
CUSTOM = [("h100/tf32", dict(tf32_operands="rne")), ("a100/tf32", dict(tf32_operands="rna")),
          ("h100/bf16", dict(c_entry="after")), ("b200/fp8_e4m3", dict(c_entry="aligned")),
          ("h100/fp8_e4m3", dict(overflow="saturate")), ("ada/fp16", dict(zero_exponent=-20)),
          ("mi300/bf16", dict(combine_rounding="toward_zero")),
          ("mi300/fp8_e4m3fnuz", dict(group_rounding="toward_zero", c_cutoff=None)),
          ("mi250/fp16", dict(ftz=False, L=2)), ("mi100/bf16", dict(L=5))]


@pytest.mark.parametrize("base,changes", CUSTOM, ids=[f"{b}:{c}" for b, c in CUSTOM])
def test_custom_models_equal_numpy(base, changes):
    m: TensorCoreModel = ff.tensorcore_models()[base].replace(**changes)
    rng = np.random.default_rng(_seed(base) + 2)
    for i, (a, b) in enumerate(cases(m.fmt, rng)[:4]):
        fmt = "fp32" if m.fmt == "tf32" else m.fmt
        check(*both(ff.matmul, a, b, fmt, model=m, rounding=("nearest_even", "up")[i % 2]))
        shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
        check(*both(ff.mma, a, b, _c_for(shape, m.fmt, rng, False), fmt, m))


def test_every_preset_runs_on_the_device():
    """The registry, read now: every preset runs through the device code and equals
    numpy, or (block-scaled presets, which are not matmul models: their unit is
    ``block_scaled_mma``, tested below for each) is refused by both paths alike with
    the same ValueError; nothing raises NotImplementedError."""
    rng = np.random.default_rng(5)
    for preset, m in ff.tensorcore_models().items():
        a, b = operands(m.fmt, (3, 40), rng, "wide"), operands(m.fmt, (40, 2), rng, "wide")
        if m.fmt != "int8":
            sprinkle(a[1], m.fmt, rng)
        if m.block_fmt is not None:
            for x, y in ((a, b), (torch.from_numpy(a), torch.from_numpy(b))):
                with force_namespace(), pytest.raises(ValueError, match="block_scaled_matmul"):
                    ff.matmul(x, y, m.fmt, model=preset)
            continue
        check(*both(ff.matmul, a, b, m.fmt, model=preset))


def test_device_path_refusals():
    """Misuse raises the numpy path's ValueError / TypeError."""
    a, b = torch.ones(2, 3), torch.ones(3, 2)
    with force_namespace():
        # stochastic rounding runs (tests/test_torch_tensorcore_sr.py); its options are
        # checked as on numpy
        with pytest.raises(TypeError, match="torch.Generator"):
            ff.matmul(a, b, "bf16", model="h100", rounding="stochastic",
                      rng=np.random.default_rng(1))
        with pytest.raises(ValueError, match="sr_bits applies to the stochastic"):
            ff.matmul(a, b, "bf16", model="h100", sr_bits=8)
        with pytest.raises(ValueError, match="sr_bits must be an integer"):
            ff.matmul(a, b, "bf16", model="h100", rounding="stochastic", rng=1, sr_bits=0)
        with pytest.raises(ValueError, match="order="):
            ff.matmul(a, b, "bf16", model="h100", order="pairwise")
        with pytest.raises(ValueError, match="block must be a positive integer"):
            ff.matmul(a, b, "bf16", model="h100", block=0)
        with pytest.raises(ValueError, match="do not align"):
            ff.matmul(a, a, "bf16", model="h100")
        with pytest.raises(ValueError, match="at least 2 dimensions"):
            ff.mma(a[0], b, 0.0, "bf16", "h100")
        with pytest.raises(ValueError, match="does not broadcast"):
            ff.mma(a, b, torch.ones(3, 3), "bf16", "h100")
        with pytest.raises(ValueError, match="int32 range"):
            ff.mma(a, b, 0.5, "int8", "h100")
        with pytest.raises(TypeError, match="c must be a number"):
            ff.mma(a, b, "x", "bf16", "h100")


BLOCK_PRESETS = [p for p in PRESETS if ff.tensorcore_models()[p].block_fmt is not None]


@pytest.mark.parametrize("preset", BLOCK_PRESETS)
def test_block_scaled_mma_equals_numpy(preset):
    """The block-scaled units (ST-FDPA / GST-FDPA) on the device path: elements over the
    element format's range (zeros of both signs, values it rounds), scales of the scale
    format (ue8m0 powers of two, or ue4m3 values) with a zero, a negative (its sign is
    ignored) and a NaN scale; batched, K not a multiple of the scale block; c aligned."""
    m = ff.tensorcore_models()[preset]
    rng = np.random.default_rng(_seed(preset))
    elem = ff.get_format(m.fmt)
    for batch, M, K, N in (((), 3, 64, 2), ((2,), 2, 80, 3), ((), 1, 16, 1)):
        nb = -(-K // m.scale_block)
        a = operands(m.fmt, batch + (M, K), rng, "wide")
        b = operands(m.fmt, (K, N), rng, "wide")
        a.reshape(-1)[:2] = [0.0, -0.0]
        if m.scale_fmt == "e8m0":
            sa = np.exp2(rng.integers(-20, 20, batch + (M, nb)).astype(float))
            sb = np.exp2(rng.integers(-20, 20, (nb, N)).astype(float))
        else:
            sa = ff.cast(rng.random(batch + (M, nb)) * 400, m.scale_fmt)
            sb = ff.cast(rng.random((nb, N)) * 400, m.scale_fmt)
        if M * nb >= 3:
            sa.reshape(-1)[:3] = [0.0, -sa.reshape(-1)[1], np.nan]
        c = operands("fp32", batch + (M, N), rng, "narrow") * 2.0 ** elem.emax
        check(*both(block_scaled_mma, a, sa, b, sb, c, preset))
        check(*both(block_scaled_mma, a, sa, b, sb, 0.0, preset.split("/")[0], m.block_fmt))


@pytest.mark.parametrize("preset", [p for p in BLOCK_PRESETS if ff.tensorcore_models()[p].group > 1])
def test_gst_zero_group_sums_on_the_device_equal_slow_model(preset):
    """Issue 22: a GST group that cancels to exactly 0 still aligns by its scales'
    exponent, on the device path too (against the independent slow model, and equal to
    the numpy path bit for bit)."""
    from tests.oracles import matrixunit_slow as slow
    from tests.test_matrixunits import _zero_group_cases
    m = ff.tensorcore_models()[preset]
    rng = np.random.default_rng(_seed(preset + "zero-groups"))
    a, b, sa, sb, c = _zero_group_cases(m, 120, rng)
    args = (a[:, None, :], sa[:, None, :], b[:, :, None], sb[:, :, None], c[:, None, None], preset)
    got, want = both(block_scaled_mma, *args)
    check(got, want)
    ref = np.array([[[slow.dot(a[i], b[i], m, c[i], sa[i], sb[i])]] for i in range(len(c))])
    check(got, ref)
