"""The GPU capture: its pure helpers (no torch), a CPU dry run (torch only), and the
real capture (marked ``gpu``: torch with CUDA)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from floatfmt import cast, get_format, values
from floatfmt.gpu import capture as C
from floatfmt.gpu import probes as P
from floatfmt.gpu.fixture import Fixture, FixtureWriter, read_expected

ROOT = Path(__file__).resolve().parents[1]


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


# ----------------------------------------------------------------------------- structured inputs
@pytest.mark.parametrize("target,dtype", [("fp16", np.float16), ("bf16", ml_dtypes.bfloat16),
                                          ("fp8_e4m3", ml_dtypes.float8_e4m3fn),
                                          ("fp8_e5m2", ml_dtypes.float8_e5m2)])
def test_structured_set_brackets_every_midpoint(target, dtype):
    """Around every midpoint between neighbours, -1 ulp rounds down and +1 ulp rounds up
    (checked with ml_dtypes, an independent implementation)."""
    codes = P.structured_cast_inputs(target)
    assert (np.diff(codes.astype(np.int64)) > 0).all(), "sorted and unique"
    v = values(target)
    v = v[v >= 0]
    mids = ((v[:-1] + v[1:]) / 2).astype(np.float32)
    mc = P.f32_codes(mids)
    below, above = P.f32_step(mc, False), P.f32_step(mc, True)
    assert np.isin(mc, codes).all() and np.isin(below, codes).all() and np.isin(above, codes).all()
    lo = P.f32_values(below).astype(np.float32).astype(dtype).astype(np.float64)
    hi = P.f32_values(above).astype(np.float32).astype(dtype).astype(np.float64)
    assert (lo == v[:-1]).all() and (hi == v[1:]).all()
    assert np.isin(P.f32_codes(v.astype(np.float32)), codes).all()


@pytest.mark.parametrize("target,boundaries", [("fp8_e4m3", [448.0, 464.0, 480.0]),
                                               ("fp8_e5m2", [57344.0, 61440.0]),
                                               ("fp16", [65504.0, 65520.0]),
                                               ("bf16", [(2 - 2.0 ** -7) * 2.0 ** 127,
                                                         (2 - 2.0 ** -8) * 2.0 ** 127])])
def test_structured_set_has_overflow_boundaries_and_specials(target, boundaries):
    codes = P.structured_cast_inputs(target)
    b = P.f32_codes(np.array(boundaries, np.float32))
    for c in (b, P.f32_step(b, True), P.f32_step(b, False), b | np.uint32(0x80000000)):
        assert np.isin(c, codes).all()
    for special in (0x00000000, 0x80000000, 0x7F800000, 0xFF800000, *P.NAN_PAYLOADS_F32):
        assert special in codes
    # the smallest subnormal of the target, half of it (a tie to zero) and one ulp around
    tiny = P.f32_codes(np.float32(get_format(target).smallest_subnormal / 2))
    assert np.isin([tiny, P.f32_step(tiny, True), P.f32_step(tiny, False)], codes).all()


def test_structured_set_rejects_wide_targets():
    with pytest.raises(ValueError, match="at most 16 bits"):
        P.structured_cast_inputs("fp32")


def test_all_codes():
    c = P.all_codes("bf16")
    assert c.dtype == np.uint16 and c.size == 65536 and c[-1] == 0xFFFF
    with pytest.raises(ValueError):
        P.all_codes("fp32")


# ----------------------------------------------------------------------------- TF32 operands
def test_tf32_operands_tell_the_three_modes_apart():
    x = P.tf32_operand_values().astype(np.float64)
    r = {m: cast(x, "tf32", rounding=m) for m in ("toward_zero", "nearest_even", "nearest_away")}
    assert not np.array_equal(r["toward_zero"], r["nearest_even"])
    assert not np.array_equal(r["nearest_even"], r["nearest_away"])
    assert not np.array_equal(r["toward_zero"], r["nearest_away"])
    # the named ones of the reference file: a tie on even, past the tie, a tie on odd
    assert r["toward_zero"][:3].tolist() == [1.0, 1.0, 1 + 2.0 ** -10]
    assert r["nearest_even"][:3].tolist() == [1.0, 1 + 2.0 ** -10, 1 + 2.0 ** -9]
    assert r["nearest_away"][:3].tolist() == [1 + 2.0 ** -10, 1 + 2.0 ** -10, 1 + 2.0 ** -9]
    assert (x == P.f32_values(P.f32_codes(x))).all(), "every operand is a float32"


# ----------------------------------------------------------------------------- GEMM probes
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32", "fp8_e4m3", "fp8_e5m2"])
def test_probe_vectors_hold_the_intended_products(fmt):
    k = 32
    probes = P.gemm_probes(fmt, k, 16)
    storage = P.storage_format(fmt)
    for p in probes:
        assert p.a.shape == p.b.shape == (k,)
        fin = np.isfinite(p.a) & np.isfinite(p.b)
        assert (cast(p.a[fin], fmt) == p.a[fin]).all() and (cast(p.b[fin], fmt) == p.b[fin]).all(), p.name
        assert (P.operand_values(P.operand_codes(p.a, fmt), fmt)[fin] == p.a[fin]).all()
        assert storage.bits in (8, 16, 32)
        prod = p.a * p.b
        if p.kind == "precision":
            assert prod[:3].tolist() == [2.0 ** 14, -2.0 ** 14, 2.0 ** (14 - p.param)]
        if p.kind == "rounding":
            s = 1.5 * 2.0 ** (14 - abs(p.param))
            assert prod[2] == (s if p.param > 0 else -s)
        if p.kind == "block":
            assert sorted(prod.tolist())[0] == -2.0 ** 14 and (prod[prod > 0] != 2.0 ** 14).sum() == k - 2
    names = {p.name for p in probes}
    assert {"precision_d25", "rounding_d25", "final_p23", "block_p0", "nan"} <= names
    assert ("inf" in names) == (fmt != "fp8_e4m3"), "OCP E4M3 has no Inf"


def test_split_product():
    for fmt in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2"):
        for e in range(-18, 15):
            for m in (1.0, 1.5):
                p = m * 2.0 ** e
                s = P.split_product(p, fmt)
                if s is None:
                    continue
                a, b = s
                assert a * b == p and cast(a, fmt) == a and cast(b, fmt) == b
    assert P.split_product(2.0 ** -40, "fp8_e4m3") is None  # below 2**-18, the smallest product
    assert P.split_product(np.inf, "fp8_e4m3") is None


def test_promotion_probes():
    (p,) = P.promotion_probes("fp8_e5m2", 256, [10])
    prod = p.a * p.b
    assert prod[10] == 2.0 ** 14 and (np.delete(prod, 10) == 1).all()
    assert P.promotion_probes("fp8_e4m3", 64, [100]) == []  # position past k


def test_diagnosis_reads_probe_results():
    names = ["precision_d24", "precision_d25", "precision_d26", "rounding_d25", "final_p23", "block_p0"]
    kinds = ["precision", "precision", "precision", "rounding", "final", "block"]
    params = [24, 25, 26, 25, 23, 0]
    res = [2.0 ** -10, 2.0 ** -11, 0.0, 2.0 ** -11, 2.0, 18 * 2.0 ** -18]
    d = P.diagnose_probes(names, kinds, params, res, 32)
    assert d["F"] == 25 and d["rounding"] == "truncate" and d["final_p23"] == "RZ"
    assert d["lost_block_p0"] == 12


# ----------------------------------------------------------------------------- random operands
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32", "fp8_e4m3", "fp8_e5m2"])
def test_random_operands(fmt):
    a, b = P.random_operands(11, fmt, 32, 64, 16)
    a2, _ = P.random_operands(11, fmt, 32, 64, 16)
    assert np.array_equal(a, a2) and a.shape == (32, 64) and b.shape == (64, 16)
    v = np.concatenate([P.operand_values(a, fmt).ravel(), P.operand_values(b, fmt).ravel()])
    assert np.isfinite(v).all() and (v != 0).all()
    lo, hi = P.exponent_range(fmt)
    e = np.floor(np.log2(np.abs(v)))
    assert e.min() >= lo and e.max() <= hi and (v < 0).any() and (v > 0).any()
    if fmt == "tf32":
        assert (P.operand_codes(v, "fp32") & 0x1FFF).any(), "tf32 operands carry low fp32 bits"


def test_random_operands_are_pinned():
    """Fixtures store seeds, not operands: the operands of a seed must never change
    (PCG64's raw stream is fixed by its algorithm; this pins our use of it)."""
    a, b = P.random_operands(2026, "bf16", 2, 3, 2)
    assert [hex(int(c)) for c in a.ravel()] == ["0x36aa", "0xba3f", "0x43ea", "0x47f3", "0x401a", "0xbd28"]
    assert [hex(int(c)) for c in b.ravel()] == ["0xc15c", "0x3597", "0xbbcf", "0x3d0d", "0xbbb1", "0xc471"]
    a, b = P.random_operands(2026, "fp8_e4m3", 1, 4, 1)
    assert [hex(int(c)) for c in a.ravel()] == ["0x62", "0xef", "0x52", "0x3b"]
    a, b = P.random_operands(2026, "tf32", 1, 2, 1)
    assert [hex(int(c)) for c in a.ravel()] == ["0x3692f9aa", "0xba434cbf"]


def test_random_plan():
    for cfg in C.GEMM_CONFIGS:
        plan = C.random_plan(*cfg)
        assert sum(p["m"] * p["n"] for p in plan) >= 20000
        ks = [p["k"] for p in plan]
        assert min(ks) == 16 and max(ks) == 4096 and all(k % 16 == 0 for k in ks)
        assert all(p["m"] >= 64 and p["n"] >= 64 for p in plan)
    seeds = [p["seed"] for cfg in C.GEMM_CONFIGS for p in C.random_plan(*cfg)]
    assert len(set(seeds)) == len(seeds), "every matmul has its own operands"


# ----------------------------------------------------------------------------- small helpers
def test_sweep_order_is_a_permutation():
    for n in (1, 5, 256):
        o = C.sweep_order(n)
        assert sorted(o) == list(range(n))
    assert C.sweep_order(256)[:4] == [0, 128, 64, 192]


def test_choose_overflow_and_presets():
    assert C.choose_overflow("fp8_e5m2", {1e6: 0x7C, np.inf: 0x7C})[0] == "inf"
    assert C.choose_overflow("fp8_e5m2", {1e6: 0x7B, np.inf: 0x7B})[0] == "saturate"
    assert C.preset_for_capability((7, 0)) == "v100" and C.preset_for_capability((9, 0)) == "h100"
    assert C.model_blocks("h100")["fp8_e4m3"] == 32 and C.model_blocks("h100")["tf32"] == 8


def test_summary_table_prints_not_compared():
    t = C.summary_table([("cast.a", 10, 10, 0), ("probe.b", 5, None, None)])
    lines = t.splitlines()
    assert lines[0].split() == ["check", "cases", "matches", "mismatches"]
    assert lines[2].split() == ["probe.b", "5", "n/c", "n/c"]


# ----------------------------------------------------------------------------- fixture files
def test_fixture_round_trip(tmp_path):
    w = FixtureWriter(tmp_path, {"evidence": "cpu", "device": {"name": "x"}})
    arrays = {"u8": np.arange(200, dtype=np.uint8)[::-1].copy(),
              "u16": np.array([0, 0xFFFF, 3] * 40, np.uint16),
              "u32": P.structured_cast_inputs("fp8_e4m3"),
              "i64": np.array([-5, 2 ** 40] * 50, np.int64),
              "mat": np.arange(12, dtype=np.uint32).reshape(3, 4),
              "f": np.array([1.5, np.nan, -np.inf])}
    refs = {k: w.put("a.npz", k, v) for k, v in arrays.items()}
    w.add_check({"name": "c", "kind": "cast", "params": {"x": np.float64(np.inf), "n": np.int64(3)},
                 "arrays": refs})
    with pytest.raises(ValueError, match="duplicate"):
        w.add_check({"name": "c", "kind": "cast"})
    w.section("casts", status="ok")
    w.save()
    fx = Fixture(tmp_path)
    for k, v in arrays.items():
        got = fx.array(refs[k])
        assert got.dtype == v.dtype and got.shape == v.shape
        assert np.array_equal(got, v, equal_nan=True)
    assert fx.summary["arrays"][refs["u32"]]["encoding"] == "delta"
    assert fx.summary["arrays"][refs["mat"]]["encoding"] == "raw"
    assert fx.checks[0]["params"] == {"x": "inf", "n": 3}
    assert not list(tmp_path.glob(".*tmp*")), "temporary files are renamed away"


def test_fixture_writer_rejects_strings(tmp_path):
    with pytest.raises(TypeError):
        FixtureWriter(tmp_path).put("a.npz", "s", np.array(["x"]))


def test_expected_file_parsing(tmp_path):
    p = tmp_path / "expected_differences.txt"
    p.write_text("# comment\n\nsweep.* *  all of them, for a reason\nprobe.x a,b  two probes\n")
    e = read_expected(p)
    assert [(x.check, x.line) for x in e] == [("sweep.*", 3), ("probe.x", 4)]
    assert e[0].covers("sweep.fp32-fp16.cuda", "anything") and not e[0].covers("cast.x", "a")
    assert e[1].covers("probe.x", "B") and not e[1].covers("probe.x", "c")
    assert read_expected(tmp_path / "missing.txt") == []


# ----------------------------------------------------------------------------- the script itself
def test_capture_imports_and_fails_cleanly_without_torch(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"
            "import floatfmt.gpu.capture as c\n"
            f"sys.exit(c.main(['--out', {str(tmp_path / 'o')!r}, '--dry-run']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "needs the package 'torch'" in r.stderr
    assert 'pip install "floatfmt[gpu]"' in r.stderr and "Traceback" not in r.stderr


def test_capture_rejects_unknown_section(capsys):
    assert C.main(["--out", "unused", "--sections", "casts,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err


@pytest.mark.skipif(_torch() is None, reason="torch is not installed (the CPU dry run needs torch)")
def test_dry_run_on_cpu(tmp_path):
    """The whole script on torch's CPU kernels with tiny GEMMs; what it records must
    replay to the same counts through floatfmt.gpu.compare."""
    out = tmp_path / "dry"
    r = subprocess.run([sys.executable, "-m", "floatfmt.gpu.capture", "--out", str(out), "--dry-run",
                        "--workers", "1", "--sweep-chunks", "1", "--sweep-chunk-bits", "18"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600,
                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    tail = r.stdout.strip().splitlines()
    assert any(line.split()[:4] == ["check", "cases", "matches", "mismatches"] for line in tail[-80:])
    s = json.loads((out / "summary.json").read_text())
    assert s["evidence"] == "cpu" and all(v["status"] == "ok" for v in s["sections"].values()), s["sections"]
    names = [c["name"] for c in s["checks"]]
    for want in ("cast.fp32-fp8_e4m3.cpu", "cast.bf16-fp32.cpu", "tf32.a.on", "probe.fp16.k16.fp32",
                 "promotion.fp8_e4m3.k1024.fp32.slow", "random.fp8_e5m2.bf16.fast", "sweep.fp32-fp16.cpu"):
        assert want in names
    from floatfmt.gpu.compare import compare_fixture
    fx = Fixture(out)
    for chk, res in zip(fx.checks, compare_fixture(fx)):
        assert res.status != "error", (chk["name"], res.note)
        if chk.get("matches") is not None:
            assert (res.cases, res.matches) == (chk["cases"], chk["matches"]), chk["name"]
    # casts on the CPU agree with floatfmt once the overflow policy is the device's
    for chk in fx.checks:
        if chk["kind"] in ("cast", "sweep"):
            assert chk["mismatches"] == 0, chk["name"]
    # the torch section's speed figures reach the report, one line each
    from floatfmt.gpu.compare import format_report
    report = format_report(fx, compare_fixture(fx), 0).splitlines()
    at = report.index("  speed on cpu (floatfmt's torch path; not checks):")
    figures = [line.split(":")[0].strip() for line in report[at + 1:]]
    assert figures == ["cast", "casts_f32", "gemm_vs_sgemm", "gemm_4096", "training_step"], figures


@pytest.mark.gpu
def test_capture_on_the_gpu(tmp_path):
    torch = _torch()
    if torch is None:
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here; the capture runs only on a GPU machine")
    out = tmp_path / "gpu"
    r = subprocess.run([sys.executable, "-m", "floatfmt.gpu.capture", "--out", str(out), "--budget", "330"],
                       capture_output=True, text=True, cwd=ROOT, timeout=420)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["evidence"] == "gpu" and s["device"]["capability"]
    assert all(v["status"] == "ok" for v in s["sections"].values()), s["sections"]
    assert s["seconds"] < 360
