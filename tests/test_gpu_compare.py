"""Replay of recorded GPU fixtures against the emulator (no GPU, no torch needed).

Every fixture under tests/data/gpu/*/ is compared check by check on every CI run;
a mismatch not listed, with a reason, in that fixture's expected_differences.txt
fails.  The rest of the file tests the comparison machinery on synthetic
fixtures, where the right answer is known.
"""

import json

import numpy as np
import pytest

from floatfmt.core.codec import values_to_codes
from floatfmt.gpu import probes as P
from floatfmt.gpu.compare import (FP8_PROMOTION_INTERVAL, compare_fixture, format_report, predict_cast,
                                  predict_dots, predict_gemm, report_main, same_bits, unused_expected)
from floatfmt.gpu.fixture import Fixture, FixtureWriter, default_root, find_fixtures

FIXTURES = find_fixtures(default_root())


# ----------------------------------------------------------------------------- committed fixtures
def test_committed_fixtures_exist():
    assert FIXTURES, f"no fixture under {default_root()}"


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_replay_fixture(path):
    fx = Fixture(path)
    results = compare_fixture(fx)
    assert results, "fixture holds no checks"
    errors = [f"{r.name}: {r.note}" for r in results if r.status == "error"]
    assert not errors, "checks that could not be compared:\n" + "\n".join(errors)
    bad = [r for r in results if r.n_unexplained]
    if bad:
        pytest.fail("mismatches not listed in expected_differences.txt:\n"
                    + format_report(fx, bad, show=5))
    stale = unused_expected(fx, results)
    assert not stale, "expected_differences.txt lines that match nothing: " + \
        ", ".join(f"line {e.line} ({e.check} {e.selector})" for e in stale)
    total = sum(r.cases for r in results)
    assert total > 0


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixture_is_labelled(path):
    fx = Fixture(path)
    s = fx.summary
    assert s["evidence"] in ("gpu", "cpu")
    readme = (path / "README.md").read_text()
    if s["evidence"] == "cpu":
        assert "CPU evidence, not GPU evidence" in readme
    else:
        assert s["device"].get("capability"), "a GPU fixture records the compute capability"
    for key in ("torch", "numpy", "floatfmt"):
        assert s["versions"].get(key), f"versions.{key} missing"
    size = sum(f.stat().st_size for f in path.iterdir())
    assert size < 5 * 2 ** 20, f"fixture is {size / 2**20:.1f} MiB; keep fixtures a few MB at most"


def test_report_main_on_committed(capsys):
    assert report_main(None, 3) == 0
    out = capsys.readouterr().out
    assert "cases" in out and "mismatches" in out


# ----------------------------------------------------------------------------- synthetic fixtures
def _cast_fixture(tmp_path, tamper=None, expected=None, nan_swap=False, zero_sign=False):
    x = P.structured_cast_inputs("fp8_e4m3")
    gpu = predict_cast(x, "fp32", "fp8_e4m3", "saturate").copy()
    if tamper is not None:
        i = int(np.flatnonzero(x == tamper)[0])
        gpu[i] ^= 1
    if nan_swap:  # another NaN code for NaN inputs: 0xff instead of 0x7f
        nan_in = np.isnan(P.f32_values(x))
        gpu[nan_in] = 0xFF
    if zero_sign:
        i = int(np.flatnonzero(x == 0)[0])
        gpu[i] = 0x80  # -0 for +0
    w = FixtureWriter(tmp_path, {"evidence": "cpu", "device": {}, "versions": {}})
    ref = w.put("casts.npz", "in", x)
    w.add_check({"name": "cast.fp32-fp8_e4m3.demo", "kind": "cast",
                 "params": {"src": "fp32", "dst": "fp8_e4m3", "overflow": "saturate"},
                 "arrays": {"inputs": ref, "outputs": w.put("casts.npz", "out", gpu)}})
    w.save()
    if expected is not None:
        (tmp_path / "expected_differences.txt").write_text(expected)
    return Fixture(tmp_path), x


def test_cast_replay_all_match(tmp_path):
    fx, x = _cast_fixture(tmp_path)
    (r,) = compare_fixture(fx)
    assert (r.cases, r.matches, r.n_mismatch, r.status) == (x.size, x.size, 0, "ok")


def test_cast_replay_finds_one_flipped_bit(tmp_path):
    bad = int(P.f32_codes(464.0))
    fx, x = _cast_fixture(tmp_path, tamper=bad)
    (r,) = compare_fixture(fx)
    assert r.n_mismatch == 1 and r.matches == x.size - 1 and r.status == "mismatch"
    m = r.mismatches[0]
    assert m.key == "0x43e80000" and "464.0" in m.inputs and m.reason is None
    assert r.n_unexplained == 1 and not r.ok


def test_expected_difference_with_reason_excuses_it(tmp_path):
    fx, _ = _cast_fixture(tmp_path, tamper=int(P.f32_codes(464.0)),
                          expected="cast.fp32-* 0x43E80000  demo: a planted difference\n")
    (r,) = compare_fixture(fx)
    assert r.n_mismatch == 1 and r.n_expected == 1 and r.ok
    assert r.mismatches[0].reason == "demo: a planted difference"
    assert "[expected: demo: a planted difference]" in format_report(fx, [r])


def test_expected_difference_for_another_input_does_not(tmp_path):
    fx, _ = _cast_fixture(tmp_path, tamper=int(P.f32_codes(464.0)),
                          expected="cast.fp32-fp8_e4m3.demo 0x43f00000  another input\n")
    (r,) = compare_fixture(fx)
    assert r.n_unexplained == 1
    assert [e.line for e in unused_expected(fx, [r])] == [1]


def test_expected_difference_needs_a_reason(tmp_path):
    with pytest.raises(ValueError, match="reason"):
        _cast_fixture(tmp_path, expected="cast.* *\n")


def test_nan_codes_compare_by_class(tmp_path):
    fx, _ = _cast_fixture(tmp_path, nan_swap=True)
    (r,) = compare_fixture(fx)
    assert r.n_mismatch == 0


def test_signed_zero_is_a_mismatch(tmp_path):
    fx, _ = _cast_fixture(tmp_path, zero_sign=True)
    (r,) = compare_fixture(fx)
    assert [m.key for m in r.mismatches] == ["0x00000000"]


def test_same_bits():
    g = np.array([0x7E00, 0x7C00, 0x0000, 0x7E01], np.uint16)
    p = np.array([0x7FFF, 0x7C00, 0x8000, 0x7C00], np.uint16)
    assert same_bits(g, p, "fp16").tolist() == [True, True, False, False]


def test_predict_cast_overflow_policies():
    x = P.f32_codes([464.0, 464.00003, 480.0, 1e6, np.inf, -np.inf])
    assert predict_cast(x, "fp32", "fp8_e4m3").tolist() == [0x7E, 0x7F, 0x7F, 0x7F, 0x7F, 0xFF]
    assert predict_cast(x, "fp32", "fp8_e4m3", "saturate").tolist() == [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE]
    assert predict_cast(P.f32_codes([61440.0, 61439.996]), "fp32", "fp8_e5m2").tolist() == [0x7C, 0x7B]


def _sweep_fixture(tmp_path, count):
    x = P.f32_codes([464.0, 1.0, 2.0])
    pred = predict_cast(x, "fp32", "fp8_e4m3")
    gpu = pred.copy()
    gpu[0] = 0x7D  # a mismatch that still replays as one
    w = FixtureWriter(tmp_path, {"evidence": "cpu"})
    w.add_check({"name": "sweep.demo", "kind": "sweep",
                 "params": {"src": "fp32", "dst": "fp8_e4m3", "overflow": "nan", "cases": 2 ** 32,
                            "mismatches": count, "chunks_done": 256, "chunks_total": 256},
                 "arrays": {"inputs": w.put("sweep.npz", "in", x), "outputs": w.put("sweep.npz", "out", gpu)}})
    w.save()
    return Fixture(tmp_path)


def test_sweep_replays_stored_mismatches(tmp_path):
    (r,) = compare_fixture(_sweep_fixture(tmp_path, 1))
    assert r.cases == 2 ** 32 and r.n_mismatch == 1 and r.mismatches[0].key == "0x43e80000"
    assert r.matches == 2 ** 32 - 1


def test_sweep_counts_mismatches_beyond_the_stored(tmp_path):
    (r,) = compare_fixture(_sweep_fixture(tmp_path, 5000))
    assert r.n_mismatch == 1 + 4997 and r.extra_mismatches == 4997
    assert "rerun the capture" in r.note and not r.ok


# ----------------------------------------------------------------------------- GEMM emulation
def test_precision_probes_follow_the_published_h100_model():
    """d <= F=25: the small term 2**(14-d) survives exactly; d > 25: it is truncated away."""
    params = {"in_fmt": "bf16", "out_fmt": "fp32", "model": "h100", "fast_accum": None}
    probes = [p for p in P.gemm_probes("bf16", 16) if p.kind == "precision"]
    pred = P.operand_values(predict_dots(np.stack([p.a for p in probes]), np.stack([p.b for p in probes]),
                                         params), "fp32")
    want = [2.0 ** (14 - p.param) if p.param <= 25 else 0.0 for p in probes]
    assert pred.tolist() == want


def test_probe_diagnosis_of_emulator_outputs():
    params = {"in_fmt": "fp16", "out_fmt": "fp32", "model": "h100", "fast_accum": None}
    k = 32
    probes = P.gemm_probes("fp16", k, 16)
    pred = predict_dots(np.stack([p.a for p in probes]), np.stack([p.b for p in probes]), params)
    vals = P.operand_values(pred, "fp32")
    d = P.diagnose_probes([p.name for p in probes], [p.kind for p in probes], [p.param for p in probes],
                          vals, k, {p.name: p.meta for p in probes})
    assert d["F"] == 25 and d["rounding"] == "truncate" and d["final_p23"] == "RZ"
    assert d["lost_block_p0"] == 16 - 2  # the small terms fused with the big pair
    names = [p.name for p in probes]
    assert vals[names.index("all_neg_zero")] == 0 and not np.signbit(vals[names.index("all_neg_zero")])
    assert np.isnan(vals[names.index("inf_minus_inf")])


@pytest.mark.parametrize("fast,lost0", [(True, 1023), (False, FP8_PROMOTION_INTERVAL - 1)])
def test_fp8_promotion_model(fast, lost0):
    """Big product at position 0, then 1023 products of 1: the 13-bit accumulator drops
    them all; a promotion every N elements keeps all but the first interval's."""
    k = 1024
    probes = P.promotion_probes("fp8_e4m3", k, [0, 200])
    params = {"in_fmt": "fp8_e4m3", "out_fmt": "fp32", "model": "h100", "fast_accum": fast}
    pred = P.operand_values(predict_dots(np.stack([p.a for p in probes]), np.stack([p.b for p in probes]),
                                         params), "fp32")
    d = P.diagnose_probes([p.name for p in probes], [p.kind for p in probes], [p.param for p in probes],
                          pred, k)
    assert d["promotion_lost"][0] == lost0


def _random_fixture(tmp_path, tamper=False):
    params = {"in_fmt": "bf16", "out_fmt": "bf16", "model": "h100", "fast_accum": None, "form": "random",
              "parts": []}
    w = FixtureWriter(tmp_path, {"evidence": "cpu"})
    for j, k in enumerate((16, 80)):
        part = {"seed": 7 + j, "m": 4, "k": k, "n": 3, "spread": 20}
        a, b = P.random_operands(part["seed"], "bf16", 4, k, 3)
        out = predict_gemm(P.operand_values(a, "bf16"), P.operand_values(b, "bf16"), params)
        if tamper and j == 1:
            out[1, 2] ^= 1
        part["out"] = w.put("matmul.npz", f"p{j}", out)
        params["parts"].append(part)
    w.add_check({"name": "random.bf16.bf16", "kind": "gemm", "params": params, "arrays": {}})
    w.save()
    return Fixture(tmp_path)


def test_random_gemm_replay(tmp_path):
    (r,) = compare_fixture(_random_fixture(tmp_path))
    assert (r.cases, r.matches, r.n_mismatch) == (24, 24, 0)


def test_random_gemm_replay_locates_a_wrong_output(tmp_path):
    (r,) = compare_fixture(_random_fixture(tmp_path, tamper=True))
    assert [m.key for m in r.mismatches] == ["part1:r1c2"]


def test_predict_gemm_tf32_truncates_operands():
    x = np.array([[1 + 2.0 ** -11 + 2.0 ** -20]])
    one = np.ones((1, 1))
    on = predict_gemm(x, one, {"in_fmt": "tf32", "out_fmt": "fp32", "model": "h100"})
    off = predict_gemm(x, one, {"in_fmt": "fp32", "out_fmt": "fp32", "model": "h100", "tf32": False})
    assert P.operand_values(on, "fp32")[0, 0] == 1.0  # the 13 low bits dropped
    assert P.operand_values(off, "fp32")[0, 0] == x[0, 0]


# ----------------------------------------------------------------------------- report entry
def test_report_main_exit_codes(tmp_path, capsys):
    assert report_main(tmp_path / "nothing-here", 5) == 2
    assert "no GPU fixtures" in capsys.readouterr().out
    _cast_fixture(tmp_path / "ok")
    assert report_main(tmp_path / "ok", 5) == 0
    _cast_fixture(tmp_path / "bad", tamper=int(P.f32_codes(464.0)))
    assert report_main(tmp_path, 5) == 1  # both fixtures, one fails
    out = capsys.readouterr().out
    assert "fixture ok" in out and "fixture bad" in out and "first mismatches" in out


def test_cli_gpu_report(tmp_path, capsys):
    from floatfmt.cli import main
    _cast_fixture(tmp_path)
    assert main(["gpu-report", str(tmp_path), "--show", "1"]) == 0
    assert "cast.fp32-fp8_e4m3.demo" in capsys.readouterr().out


def test_fixture_newer_version_is_refused(tmp_path):
    _cast_fixture(tmp_path)
    s = json.loads((tmp_path / "summary.json").read_text())
    s["version"] = 99
    (tmp_path / "summary.json").write_text(json.dumps(s))
    with pytest.raises(ValueError, match="newer"):
        Fixture(tmp_path)


def test_values_to_codes_of_gpu_outputs_roundtrip():
    # the replay decodes GPU codes with the same table the emulator encodes with
    codes = P.all_codes("bf16")
    v = P.operand_values(codes, "bf16")
    back = values_to_codes(v, P.storage_format("bf16"))
    fin = ~np.isnan(v)
    assert (back[fin] == codes[fin]).all()
