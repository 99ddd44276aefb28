"""``ff.block_scaled_matmul`` and ``ff.recipe_matmul`` on the device path equal the
numpy path bit for bit.

The device path (CUDA; here CPU tensors under ``force_namespace``) quantises with
``quantize_schemes``, multiplies with ``tensorcore.block_scaled_mma`` (on the tensors) and
applies NVFP4's tensor scales with ``ops.mul_rule``; the numpy path is the
reference.  Every block-scaled preset (both B200 kinds, each block format) is run on
operands holding the edge values of the class: zeros, all-zero blocks, values past the
element format's range (large exponent spreads inside a block, so small elements flush),
subnormal float64 inputs, Inf and NaN (the MX formats encode them; NVFP4 refuses them),
with K a multiple of the block and not, batched and not, with and without an
accumulator input c.  Bad input must raise the same error type on both paths.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.backend.dispatch import force_namespace
from floatfmt.scaling.quantized_tensor import QuantizedTensor
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

pytestmark = pytest.mark.usefixtures("torch_one_thread")

# every block-scaled preset: (block format, GPU model)
PRESETS = [("mxfp8_e4m3", "b200"), ("mxfp8_e5m2", "b200"), ("mxfp6_e2m3", "b200"),
           ("mxfp6_e3m2", "b200"), ("mxfp4_e2m1", "b200"), ("nvfp4", "b200"),
           ("mxfp4_e2m1", "b200_mxf4nvf4"), ("nvfp4", "b200_mxf4nvf4")]

# (a shape, b shape): K = 64 (whole blocks), K = 70 and 33 (a partial last block), K = 1,
# one batched pair; M = 13 rows of A, one edge value each (see operands)
SHAPES = [((13, 64), (64, 3)), ((13, 70), (70, 5)), ((2, 13, 33), (2, 33, 3)),
          ((13, 1), (1, 2))]

# edge values, one per row of A: zeros, float64 subnormals, values far below and past
# the element format's range for a block of ordinary values (they flush / set the block
# scale), values past what E8M0 scales reach (MX: the elements saturate), the formats'
# maxima.  ``finite`` (NVFP4) drops Inf / NaN (no encoding: refused, see
# test_errors_match) and values so large that the one per-tensor scale flushes every
# ordinary block to zero (test_nvfp4_tensor_scale_extremes has those).
EDGES = [0.0, -0.0, 5e-324, -2.5e-310, 1e-300, 2.0**-140, 448.0, -6.0, 57344.0]


def operands(shape: tuple, rng: np.random.Generator, finite: bool, edges: bool) -> np.ndarray:
    """Random values of moderate spread (2**-6 .. 2**6 times a normal deviate); with
    ``edges``, row r of the last two axes holds EDGES[r] (or Inf / -Inf / NaN / a huge
    value, past the list's end) at a random place along K."""
    v = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
    if edges:
        extra = [] if finite else [-1e38, 3e300, np.inf, -np.inf, np.nan]
        vals = EDGES + extra
        rows = v.reshape(-1, shape[-2], shape[-1])
        for m in range(shape[-2]):
            rows[:, m, rng.integers(shape[-1])] = vals[m % len(vals)]
    return v


def zero_block(v: np.ndarray, axis: int) -> None:
    """Set the first 32 entries along ``axis`` (a whole block of either kind) to zero."""
    if v.shape[axis] >= 32:
        sl = [slice(None)] * v.ndim
        sl[axis] = slice(0, 32)
        sl[-2 if axis == -1 else -1] = slice(0, 1)
        v[tuple(sl)] = 0.0


def both(*args, **kwargs):
    """(numpy result, device-path result as numpy) of one call; numpy args in."""
    want = ff.block_scaled_matmul(*args, **kwargs)

    def t(v):
        return torch.from_numpy(v) if isinstance(v, np.ndarray) else v
    with force_namespace():
        got = ff.block_scaled_matmul(*(t(a) for a in args),
                                     **{k: t(v) for k, v in kwargs.items()})
    assert torch.is_tensor(got) and got.dtype == torch.float64
    return want, got.numpy()


@pytest.mark.parametrize("fmt,model", PRESETS)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_device_equals_numpy(fmt, model, sa, sb):
    rng = np.random.default_rng(zlib.crc32(f'{fmt} {model} {sa}'.encode()))
    finite = fmt == "nvfp4"
    a = operands(sa, rng, finite, edges=True)
    # b: ordinary values with zeros / subnormals at random places and one all-zero block
    b = operands(sb, rng, finite, edges=False)
    flat = b.reshape(-1)
    flat[rng.choice(flat.size, size=min(flat.size, 3), replace=False)] = [0.0, 5e-324, -1e-310][:min(flat.size, 3)]
    zero_block(a, -1)
    zero_block(b, -2)
    want, got = both(a, b, fmt, model)
    assert want.shape == got.shape
    assert int(mismatches(got, want).sum()) == 0
    if sa[-1] > 1:  # the data reach the arithmetic: most outputs finite and nonzero
        assert np.mean(np.isfinite(want) & (want != 0)) > 0.5
    # with an fp32 accumulator input c holding Inf / NaN and the edge values too
    out = np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    c = np.asarray(ff.cast(operands(out, rng, False, edges=True), "fp32"), np.float64)
    want, got = both(a, b, fmt, model, c=c)
    assert int(mismatches(got, want).sum()) == 0


@pytest.mark.parametrize("big", [1e38, 1e40, 3.4e38 * 2688])
def test_nvfp4_tensor_scale_extremes(big):
    """NVFP4 with one value near what its fp32 tensor scale holds: the tensor scale is
    huge, most blocks' E4M3 scales flush to zero; the paths agree."""
    rng = np.random.default_rng(11)
    a, b = operands((5, 40), rng, True, True), operands((40, 3), rng, True, False)
    a[2, 7] = big
    want, got = both(a, b, "nvfp4", "b200")
    assert int(mismatches(got, want).sum()) == 0
    assert np.isfinite(want).all()


@pytest.mark.parametrize("fmt,model", [PRESETS[0], PRESETS[5]])
def test_quantized_operands(fmt, model):
    """QuantizedTensor operands made on the device path give the numpy path's result;
    without a tensor among a, b, c, their steps still run on the tensors' device and a
    tensor comes back."""
    rng = np.random.default_rng(7)
    a, b = operands((13, 48), rng, True, True), operands((48, 4), rng, True, False)
    want = ff.block_scaled_matmul(ff.quantize(a, fmt, axis=-1), ff.quantize(b, fmt, axis=-2),
                                  model=model)
    with force_namespace():
        qa = ff.quantize(torch.from_numpy(a), fmt, axis=-1)
        qb = ff.quantize(torch.from_numpy(b), fmt, axis=-2)
        assert isinstance(qa, QuantizedTensor) and torch.is_tensor(qa.elements)
        got = ff.block_scaled_matmul(qa, qb, model=model)
        got_c = ff.block_scaled_matmul(qa, qb, model=model, c=torch.zeros(13, 4, dtype=torch.float64))
    assert torch.is_tensor(got)
    assert int(mismatches(got.numpy(), want).sum()) == 0
    assert int(mismatches(got_c.numpy(), want).sum()) == 0
    # host path with the same tensor operands (CPU, not forced)
    got_host = ff.block_scaled_matmul(qa, qb, model=model)
    assert int(mismatches(np.asarray(got_host), want).sum()) == 0


def _bad_calls():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 40)), rng.standard_normal((40, 3))
    nan_a = a.copy()
    nan_a[0, 0] = np.nan
    return [
        ("no fmt", (a, b), {}),
        ("unknown fmt", (a, b, "mxfp9"), {}),
        ("not a block fmt", (a, b, "fp8_e4m3"), {}),
        ("unknown model", (a, b, "mxfp8_e4m3", "h100"), {}),
        ("model for another fmt", (a, b, "mxfp8_e4m3", "b200_mxf4nvf4"), {}),
        ("model type", (a, b, "mxfp8_e4m3", 3), {}),
        ("K differs", (a, b[:-1], "mxfp8_e4m3"), {}),
        ("1-D operand", (a[0], b, "mxfp8_e4m3"), {}),
        ("c shape", (a, b, "mxfp8_e4m3"), {"c": np.zeros((3, 2))}),
        ("NaN in NVFP4", (nan_a, b, "nvfp4"), {}),
        ("NVFP4 tensor scale past fp32", (a * 1e300, b, "nvfp4"), {}),
    ]


@pytest.mark.parametrize("what,args,kwargs", _bad_calls(), ids=[c[0] for c in _bad_calls()])
def test_errors_match(what, args, kwargs):
    with pytest.raises((ValueError, TypeError)) as host:
        ff.block_scaled_matmul(*args, **kwargs)

    def t(v):
        return torch.from_numpy(v) if isinstance(v, np.ndarray) else v
    with force_namespace(), pytest.raises((ValueError, TypeError)) as dev:
        ff.block_scaled_matmul(*(t(a) for a in args), **{k: t(v) for k, v in kwargs.items()})
    assert type(dev.value) is type(host.value), (host.value, dev.value)


def test_mixed_formats_on_both_paths():
    """E4M3 times E5M2 MXFP8 operands (kind::mxf8f6f4 takes A and B types apart): the device
    path gives the host's bits; NVFP4 with MXFP8 (another instruction) is refused on both."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 32)), rng.standard_normal((32, 2))
    host = ff.block_scaled_matmul(ff.quantize(a, "mxfp8_e4m3", axis=-1),
                                  ff.quantize(b, "mxfp8_e5m2", axis=-2))
    with force_namespace():
        dev = ff.block_scaled_matmul(ff.quantize(torch.from_numpy(a), "mxfp8_e4m3", axis=-1),
                                     ff.quantize(torch.from_numpy(b), "mxfp8_e5m2", axis=-2))
    assert np.array_equal(dev.numpy(), host)
    with pytest.raises(ValueError, match="mixes with"):
        ff.block_scaled_matmul(ff.quantize(a, "mxfp8_e4m3", axis=-1),
                               ff.quantize(b, "nvfp4", axis=-2))
    with force_namespace(), pytest.raises(ValueError, match="mixes with"):
        ff.block_scaled_matmul(ff.quantize(torch.from_numpy(a), "mxfp8_e4m3", axis=-1),
                               ff.quantize(torch.from_numpy(b), "nvfp4", axis=-2))


# ff.recipe_matmul (block-scaled FP8 GEMM recipes) on the device path

RECIPES = ["deepseek_v3",
           ff.BlockFP8Recipe("small_fma_bf16", act_group=32, weight_block=(32, 16),
                             promote_every=16, promotion="fma", pow2_scale=True,
                             out_fmt="bf16")]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: getattr(r, "name", r))
@pytest.mark.parametrize("mkn", [(3, 300, 5), (13, 40, 3), (1, 1, 1)])
@pytest.mark.parametrize("finite", [True, False])
def test_recipe_matmul_device_equals_numpy(recipe, mkn, finite):
    """Every promotion rule, pow2 scales, a bf16 output, K past one promotion chunk and
    not a multiple of the tiles; edge values one per row of x (Inf / NaN in a second
    run: the paths agree on the NaN and Inf they give)."""
    M, K, N = mkn
    rng = np.random.default_rng(zlib.crc32(f"{recipe} {mkn} {finite}".encode()))
    x = operands((M, K), rng, finite, edges=True)
    w = operands((K, N), rng, True, edges=False)
    want = ff.recipe_matmul(x, w, recipe)
    with force_namespace():
        got = ff.recipe_matmul(torch.from_numpy(x), torch.from_numpy(w), recipe)
    assert torch.is_tensor(got) and got.dtype == torch.float64
    assert int(mismatches(got.numpy(), want).sum()) == 0
    if finite and K > 1:
        assert np.mean(np.isfinite(want) & (want != 0)) > 0.5


@pytest.mark.parametrize("forced", [False, True])
def test_recipe_quantized_tensor_operands(forced):
    """quantized=(qa, qw) made from tensors (x, w not given): a tensor comes back, from
    the numpy kernels on a CPU tensor, from the device code under force_namespace; both
    equal to the numpy path."""
    rng = np.random.default_rng(21)
    x, w = operands((5, 300), rng, True, True), operands((300, 4), rng, True, False)
    want = ff.recipe_matmul(x, w)
    with force_namespace(forced):
        qa = ff.quantize(torch.from_numpy(x), "fp8_e4m3", granularity="group",
                         group_size=128, axis=-1)
        qw = ff.quantize(torch.from_numpy(w), "fp8_e4m3", granularity="block",
                         block=(128, 4))
        got = ff.recipe_matmul(None, None, quantized=(qa, qw))
    assert torch.is_tensor(got) and got.dtype == torch.float64
    assert int(mismatches(got.numpy(), want).sum()) == 0


@pytest.mark.parametrize("what,args,kwargs", [
    ("1-D x", (np.ones(4), np.ones((4, 2))), {}),
    ("K differs", (np.ones((2, 4)), np.ones((3, 2))), {}),
    ("unknown recipe", (np.ones((2, 4)), np.ones((4, 2)), "deepseek_v9"), {}),
    ("recipe type", (np.ones((2, 4)), np.ones((4, 2)), 3), {}),
    ("quantized type", (np.ones((2, 4)), np.ones((4, 2))), {"quantized": (1, 2)}),
], ids=lambda v: v if isinstance(v, str) else "")
def test_recipe_errors_match(what, args, kwargs):
    with pytest.raises((ValueError, TypeError)) as host:
        ff.recipe_matmul(*args, **kwargs)
    targs = tuple(torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args)
    with force_namespace(), pytest.raises((ValueError, TypeError)) as dev:
        ff.recipe_matmul(*targs, **kwargs)
    assert type(dev.value) is type(host.value), (host.value, dev.value)
