"""Replay of the measured output of an Intel Xeon's AMX / AVX512-BF16 / AVX512-FP16 units and
of torch.mm on bf16 CPU tensors (tests/data/cpu/intel_xeon_amx/, captured by this project),
on every test run: every output, bit for bit, through the CPU presets of
``floatfmt.arith.matrixunit.cpuunits``; and the same data against an independent slow model in plain Python
(``tests/oracles/intel_units.py``).

Operands and results are decoded here with numpy views, independently of floatfmt's codec.
A NaN output matches a NaN (any payload); the conversion's NaN codes are compared bit for
bit through ``cpuunits.vcvtneps2bf16``.  Every count is printed (``pytest -s``) and must be 0.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith.matrixunit import cpuunits
from tests.oracles import intel_units as slow
from conftest import same

ROOT = Path(__file__).resolve().parent / "data" / "cpu" / "intel_xeon_amx"
DATA = np.load(ROOT / "intel_xeon_amx_capture.npz")
MANIFEST = json.loads((ROOT / "manifest.json").read_text())


def bf16(codes):
    return (np.asarray(codes).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def fp32(codes):
    with np.errstate(invalid="ignore"):  # a signalling NaN is quieted by the widening
        return np.asarray(codes).astype(np.uint32).view(np.float32).astype(np.float64)


def fp16(codes):
    return np.asarray(codes).astype(np.uint16).view(np.float16).astype(np.float64)


def per_kind(bad, kinds) -> dict:
    """Mismatches per input kind (every kind listed, zeros included)."""
    out = {str(k): 0 for k in np.unique(kinds)}
    for k, n in collections.Counter(np.asarray(kinds)[bad].tolist()).items():
        out[str(k)] = n
    return out


def report(name, got, want, kinds=None) -> dict:
    bad = ~same(got, want)
    counts = {"outputs": int(bad.size), "mismatches": int(bad.sum())}
    if kinds is not None:
        counts["per_kind"] = per_kind(bad.reshape(len(kinds), -1).any(-1) if bad.ndim > 1
                                      else bad, kinds)
    print(f"{name}: {counts}")
    return counts


def amx_operands():
    return (bf16(DATA["amx_bf16_a"]), bf16(DATA["amx_bf16_b"]), fp32(DATA["amx_bf16_c"]),
            fp32(DATA["amx_bf16_d"]))


def dp_operands():
    a, b = bf16(DATA["dp_bf16_a"]).reshape(-1, 2), bf16(DATA["dp_bf16_b"]).reshape(-1, 2)
    return a, b, fp32(DATA["dp_bf16_c"]), fp32(DATA["dp_bf16_d"])


def test_manifest_matches_the_data():
    assert MANIFEST["sha256"] == __import__("hashlib").sha256(
        (ROOT / "intel_xeon_amx_capture.npz").read_bytes()).hexdigest()
    for key, n in MANIFEST["outputs"].items():
        arrays = [k for k in DATA.files if k.startswith(key) and k.endswith(("_d", "_y"))]
        if key == "fp16":
            arrays = [f"fp16_{op}" for op in ("add", "mul", "div", "sqrt", "fma")]
        assert sum(DATA[k].size for k in arrays) == n, key


def test_amx_bf16_every_tile():
    """TDPBF16PS: ff.mma(a, b, c, "bf16", "amx/bf16") equals every measured output."""
    a, b, c, d = amx_operands()
    got = ff.mma(a, b, c, "bf16", "amx")
    r = report("amx_bf16 (TDPBF16PS)", got, d, DATA["amx_bf16_kind"])
    assert r["outputs"] == 148_480 and r["mismatches"] == 0, r
    assert set(r["per_kind"]) == {"narrow", "wide", "extreme", "tiny", "subnormal", "flush",
                                  "special", "cancel"}


def test_amx_bf16_not_the_manuals_pseudo_code():
    """The data refutes Intel's sequential pseudo-code (each product added in k order to
    one fp32 sum): the same additions, in that order, get many outputs wrong; the count is
    the manifest's."""
    a, b, c, d = amx_operands()
    t = cpuunits.read_as_zero(c, ff.get_format("fp32"))
    x, y = (cpuunits.read_as_zero(v, ff.get_format("bf16")) for v in (a, b))
    with np.errstate(invalid="ignore"):
        P = x[:, :, None, :] * np.swapaxes(y, 1, 2)[:, None, :, :]
    for k in range(32):
        t = cpuunits.fp32_add(t, P[..., k])
    n = int((~same(t, d)).sum())
    print(f"amx_bf16 by the manual's sequential pseudo-code: {n} of {d.size} differ")
    assert n == MANIFEST["refuted"]["amx_bf16_sequential_pseudo_code"] and n > 0


def test_avx512_bf16_every_lane():
    """VDPBF16PS: ff.mma with the avx512/bf16 preset (one pair per lane) and ff.dot of each
    pair from a zero accumulator equal every measured lane."""
    a, b, c, d = dp_operands()
    got = ff.mma(a[:, None, :], b[:, :, None], c[:, None, None], "bf16", "avx512")[:, 0, 0]
    r = report("dp_bf16 (VDPBF16PS)", got, d, DATA["dp_bf16_kind"])
    assert r["outputs"] == 229_376 and r["mismatches"] == 0, r
    zero_c = c == 0  # where c is +0, dot (a zero accumulator) is the same instruction
    zero_c &= ~np.signbit(c)
    got = ff.dot(a[zero_c], b[zero_c], "bf16", model="avx512/bf16")
    assert zero_c.sum() > 1000 and not (~same(got, d[zero_c])).sum()


def test_vcvtneps2bf16():
    """ff.cast(x, "bf16", daz=True) gives the value of every converted code; the codes,
    NaN payloads included, are cpuunits.vcvtneps2bf16's.  Without daz the fp32
    subnormals that round to a nonzero bf16 differ."""
    x, y = DATA["cvt_bf16_x"], DATA["cvt_bf16_y"]
    x32 = x.view(np.float32)
    got = ff.cast(x32, "bf16", daz=True, dtype=np.float64)
    r = report("cvt_bf16 values (VCVTNEPS2BF16)", got, bf16(y))
    assert r["outputs"] == 294_912 and r["mismatches"] == 0
    codes = cpuunits.vcvtneps2bf16(x)
    nan = np.isnan(x32)
    print(f"cvt_bf16 codes: {int((codes != y).sum())} of {y.size} differ "
          f"({int(nan.sum())} NaN inputs)")
    assert (codes == y).all() and nan.sum() > 1000
    plain = ff.cast(x32, "bf16", dtype=np.float64)
    sub = (np.abs(x32) < np.float32(2.0 ** -126)) & (x32 != 0)
    assert (~same(plain, bf16(y)) == (sub & (plain != 0))).all()


@pytest.mark.parametrize("op", ["add", "mul", "div", "sqrt", "fma"])
def test_avx512_fp16_arithmetic(op):
    """AVX512-FP16 add / mul / div / sqrt / fma are floatfmt's fp16 operations (RNE)."""
    a, b, c = (fp16(DATA[f"fp16_{k}"]) for k in "abc")
    args = {"add": (a, b), "mul": (a, b), "div": (a, b), "sqrt": (a,), "fma": (a, b, c)}[op]
    with np.errstate(all="ignore"):
        got = getattr(ff, op)(*args, "fp16")
    r = report(f"fp16_{op}", got, fp16(DATA[f"fp16_{op}"]))
    assert r["outputs"] == 131_072 and r["mismatches"] == 0


def test_amx_int8():
    a, b, c, d = (DATA[f"amx_int8_{k}"] for k in "abcd")
    got = ff.mma(a, b, c, "int8", "amx")
    r = report("amx_int8 (TDPBSSD)", got, d.astype(np.float64))
    assert r["outputs"] == 10_240 and r["mismatches"] == 0
    assert (cpuunits.tdpb(a, b, c, "ssd") == d).all()


def test_torch_mm_is_chained_tdpbf16ps():
    """torch.mm of bf16 CPU tensors (oneDNN, AMX) is ff.matmul(a, b, "bf16", model="amx",
    out_fmt="bf16"), for every captured shape (K tiles of 32, a short last tile)."""
    total = 0
    for i, (M, N, K) in enumerate(DATA["torch_mm_shapes"]):
        a, b = bf16(DATA[f"torch_mm_{i}_a"]), bf16(DATA[f"torch_mm_{i}_b"])
        got = ff.matmul(a, b, "bf16", model="amx", out_fmt="bf16")
        r = report(f"torch_mm {M}x{N}x{K}", got, bf16(DATA[f"torch_mm_{i}_d"]))
        assert r["mismatches"] == 0 and r["outputs"] == M * N
        total += r["outputs"]
    assert total == 20_017


# ---------------------------------------------------------------------------------------------
# The independent slow model against the data (a sample per kind here; all of it: slow).
def _sample(kinds, per_kind_n, seed=25):
    rng = np.random.default_rng(seed)
    kinds = np.asarray(kinds)
    return np.concatenate([rng.permutation(np.flatnonzero(kinds == k))[:per_kind_n]
                           for k in np.unique(kinds)])


def _slow_amx(tiles, fn=slow.tdpbf16ps):
    a, b, c, d = amx_operands()
    bad = 0
    for t in tiles:
        for m in range(16):
            for n in range(16):
                v = fn(a[t, m].tolist(), b[t, :, n].tolist(), float(c[t, m, n]))
                bad += not same(np.float64(v), d[t, m, n])
    return bad


def _slow_dp(lanes):
    a, b, c, d = dp_operands()
    return sum(not same(np.float64(slow.vdpbf16ps(a[i].tolist(), b[i].tolist(), float(c[i]))),
                        d[i]) for i in lanes)


def test_slow_model_amx_sample():
    tiles = _sample(DATA["amx_bf16_kind"], 1)
    assert _slow_amx(tiles) == 0
    assert _slow_amx(tiles, slow.tdpbf16ps_manual) > 0  # the manual's order is refuted


def test_slow_model_dp_sample():
    assert _slow_dp(_sample(DATA["dp_bf16_kind"], 300)) == 0


def test_slow_model_torch_mm_small_shapes():
    for i in (0, 4):  # 16x16x32 and 33x17x70 (a short last K tile)
        a, b = bf16(DATA[f"torch_mm_{i}_a"]), bf16(DATA[f"torch_mm_{i}_b"])
        d = bf16(DATA[f"torch_mm_{i}_d"])
        for m in range(a.shape[0]):
            for n in range(b.shape[1]):
                assert same(np.float64(slow.torch_mm(a[m].tolist(), b[:, n].tolist())), d[m, n])


@pytest.mark.slow
def test_slow_model_everything():
    assert _slow_amx(range(len(DATA["amx_bf16_kind"]))) == 0
    assert _slow_dp(range(len(DATA["dp_bf16_c"]))) == 0


def test_recipe_with_the_amx_model_reproduces_torch_mm():
    """A precision recipe takes the CPU preset like a GPU one: the bf16 recipe with
    model="amx" (floatfmt.torch.emulation.matmul on CPU tensors) gives the measured
    torch.mm bits (a short last K tile: 33x17x70)."""
    torch = pytest.importorskip("torch", reason="the recipes run on torch tensors")
    from floatfmt.torch.emulation import matmul
    from floatfmt.torch.recipe import get_recipe
    r = get_recipe("bf16").replace(name="bf16_amx", model="amx")
    a, b = bf16(DATA["torch_mm_4_a"]), bf16(DATA["torch_mm_4_b"])
    got = matmul(torch.from_numpy(a), torch.from_numpy(b), r).detach().double().numpy()
    assert not (~same(got, bf16(DATA["torch_mm_4_d"]))).sum()


def test_readme_lists_the_cpu_units_with_their_counts():
    readme = (ROOT.parents[3] / "README.md").read_text()
    section = readme[readme.index("## Verified against real GPUs and CPUs"):]
    section = section[:section.index("\n## ", 3)]
    for preset, n in (("amx/bf16", "148,480"), ("avx512/bf16", "229,376"), ("amx/int8", "10,240"),
                      ('model="amx"', "20,017"), ("vcvtneps2bf16", "294,912")):
        row = [ln for ln in section.splitlines() if preset in ln and ln.startswith("|")]
        assert row and n in row[0] and "0 mismatches" in row[0], preset
    assert f"{MANIFEST['refuted']['amx_bf16_sequential_pseudo_code']:,}" in section


def test_slow_model_on_new_inputs():
    """Beyond the capture: inputs of every kind made by the capture's generator with another
    seed, and matmul shapes it does not hold (K = 1, 31, 33, 65; M or N = 1), through
    floatfmt and the slow model: the same bits."""
    from floatfmt.cpu.capture import KINDS, operands
    rng = np.random.default_rng(2025)
    for kind in KINDS:
        a, b, c = operands(rng, kind, (1, 16, 32), (1, 32, 16), (1, 16, 16))
        A, B, C = bf16(a), bf16(b), fp32(c)
        got = ff.mma(A, B, C, "bf16", "amx")
        for m in range(0, 16, 3):
            for n in range(16):
                want = slow.tdpbf16ps(A[0, m].tolist(), B[0, :, n].tolist(), float(C[0, m, n]))
                assert same(got[0, m, n], np.float64(want)), (kind, m, n)
        a, b, c = operands(rng, kind, (64, 2), (64, 2), (64,))
        got = ff.mma(bf16(a)[:, None, :], bf16(b)[:, :, None], fp32(c)[:, None, None], "bf16",
                     "avx512")[:, 0, 0]
        want = [slow.vdpbf16ps(bf16(a[i]).tolist(), bf16(b[i]).tolist(), float(fp32(c[i])))
                for i in range(64)]
        assert not (~same(got, np.array(want))).sum(), kind
    for M, N, K in ((3, 2, 1), (1, 5, 31), (4, 1, 33), (2, 3, 65)):
        a, b, _ = operands(rng, "wide", (M, K), (K, N), (1,))
        A, B = bf16(a), bf16(b)
        got = ff.matmul(A, B, "bf16", model="amx", out_fmt="bf16")
        want = [[slow.torch_mm(A[m].tolist(), B[:, n].tolist()) for n in range(N)] for m in range(M)]
        assert not (~same(got, np.array(want))).sum(), (M, N, K)
