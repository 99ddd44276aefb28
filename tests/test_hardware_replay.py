"""Replay of measured tensor-core output of real GPUs (tests/data/hardware/, Khattak and
Mikaitis, BSD 2-Clause) through ff.mma, on every test run.

Operands and results are decoded here with numpy / ml_dtypes views, independently of
floatfmt's codec.  Every set the presets claim must match in every row; every open set
(manifest.json "open") must give exactly its recorded count, so a regression, or an open
set that starts to match, fails until the manifest and the README are updated.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.gpu.compare import format_measured, measured_root, replay_measured
from floatfmt.arith.matrixunit.tensorcore import get_model
from conftest import REFERENCE_DTYPES, same as _same

ROOT = Path(__file__).resolve().parent / "data" / "hardware"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())
DATA = np.load(ROOT / "km_tensorcore.npz")
SETS = [(s, out) for s in MANIFEST["sets"] for out in s["outputs"]]
IDS = [f"{s['gpu']}-{s['fmt']}-{out}" for s, out in SETS]
OPEN = MANIFEST["open"]


def _values(codes, fmt):
    """Values (float64) of stored codes, decoded by numpy / ml_dtypes views."""
    codes = np.asarray(codes)
    if fmt in ("tf32", "fp32"):
        return codes.astype(np.uint32).view(np.float32).astype(np.float64)
    if fmt == "bf16":
        return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return codes.view(REFERENCE_DTYPES[fmt]).astype(np.float64)


def _replay(s, out, model=None, c_used=None):
    """Rows that differ when the set is replayed with ``model`` (default: its preset)."""
    a, b = _values(DATA[s["a"]], s["fmt"]), _values(DATA[s["b"]], s["fmt"])
    c = _values(DATA[s["c"]], "fp32")
    o = s["outputs"][out]
    if not (o["c_used"] if c_used is None else c_used):
        c = np.zeros_like(c)
    d = _values(DATA[o["d"]], out)
    m = model if model is not None else s["model"]
    got = ff.mma(a[:, None, :], b[:, :, None], c[:, None, None], s["fmt"], m, acc_fmt=out)
    return int((~_same(got[:, 0, 0], d)).sum())


def test_data_covers_six_gpus_and_every_format():
    gpus = {s["gpu"] for s in MANIFEST["sets"]}
    assert gpus == {"V100", "A100", "A2", "Ada", "H100", "B200"}
    assert len(SETS) == 34
    for s, out in SETS:
        assert DATA[s["a"]].shape == DATA[s["b"]].shape == (MANIFEST["rows"], s["k"])
        assert DATA[s["c"]].shape == DATA[s["outputs"][out]["d"]].shape == (MANIFEST["rows"],)


@pytest.mark.parametrize("s,out", SETS, ids=IDS)
def test_measured_set(s, out):
    n = _replay(s, out)
    key = f"{s['gpu']}/{s['fmt']}/{out}"
    if key in OPEN:
        want = OPEN[key]["mismatches"]
        assert n != 0, (f"{key} now matches every row: claim it (remove it from manifest.json "
                        "'open', update the README's verification table)")
        assert n == want, f"{key}: {n} rows differ, the manifest records {want}: update it"
    else:
        assert n == 0, f"{key} is claimed by the presets but {n} of {MANIFEST['rows']} rows differ"


@pytest.mark.parametrize("key", sorted(OPEN))
def test_open_sets_closest_model(key):
    """The closest model the documentation names gives the count it states."""
    gpu, fmt, out = key.split("/")
    s = next(s for s in MANIFEST["sets"] if s["gpu"] == gpu and s["fmt"] == fmt)
    m = get_model(s["model"], fmt).replace(**OPEN[key]["closest_model"])
    assert _replay(s, out, model=m) == OPEN[key]["closest_mismatches"]
    assert OPEN[key]["closest_mismatches"] <= OPEN[key]["mismatches"]


def test_b200_fp8_needs_c_after_the_products():
    """The evidence for the B200 FP8 preset: with c aligned as one more term (the rule of
    every other preset) the fp32 rows differ; added after, none do."""
    before = {"fp8_e4m3": (1793, 1892), "fp8_e5m2": (1764, 1597)}
    for s in MANIFEST["sets"]:
        if s["gpu"] == "B200" and s["fmt"] in before:
            m = get_model("b200", s["fmt"])
            assert m.c_entry == "after"
            aligned = m.replace(c_entry="aligned")
            assert (_replay(s, "fp32", aligned), _replay(s, "fp16", aligned)) == before[s["fmt"]]
            assert _replay(s, "fp32") == 0


def test_h100_fp8_accumulator_use():
    """H100 FP8 -> fp32 rows were measured with a zero accumulator, the fp16 rows with c."""
    for s in MANIFEST["sets"]:
        if s["gpu"] == "H100" and s["fmt"].startswith("fp8"):
            assert not s["outputs"]["fp32"]["c_used"] and s["outputs"]["fp16"]["c_used"]
            assert _replay(s, "fp32", c_used=True) > 4900
            assert _replay(s, "fp16", c_used=False) > 4900


def test_compare_replay_agrees():
    """floatfmt gpu-report's replay (floatfmt's codec) gives the counts found above."""
    res = replay_measured()
    assert len(res) == len(SETS)
    assert all(r.ok for r in res), [(r.gpu, r.fmt, r.out_fmt, r.mismatches) for r in res if not r.ok]
    got = {f"{r.gpu}/{r.fmt}/{r.out_fmt}": r.mismatches for r in res}
    assert {k: v for k, v in got.items() if v} == {k: v["mismatches"] for k, v in OPEN.items()}
    text = format_measured(res)
    assert "B200" in text and "open" in text and "verified" in text
    assert measured_root() == ROOT


def test_readme_states_what_is_verified():
    """The README's verification section names every open set with its count."""
    readme = (ROOT.parents[2] / "README.md").read_text()
    section = readme[readme.index("## Verified against real GPUs"):]
    section = section[:section.index("\n## ", 3)]
    for key, v in OPEN.items():
        gpu, fmt, out = key.split("/")
        row = [ln for ln in section.splitlines() if ln.startswith(f"| {gpu} ") and fmt in ln
               and f"-> {out}" in ln and "open" in ln]
        assert row and str(v["mismatches"]) in row[0], (key, v["mismatches"])
    for gpu in {s["gpu"] for s in MANIFEST["sets"]}:
        assert re.search(rf"^\| {gpu} ", section, re.M), gpu


def test_fixture_keeps_the_licence_and_stays_small():
    lic = (ROOT / "LICENCE-MATLAB-tensor-core.txt").read_text()
    assert "BSD 2-Clause" in lic and "Faizan A. Khattak and Mantas Mikaitis" in lic
    readme = (ROOT / "README.md").read_text()
    assert "MATLAB-tensor-core" in readme and "LICENCE-MATLAB-tensor-core.txt" in readme
    size = sum(p.stat().st_size for p in ROOT.iterdir())
    assert size < 3 * 2 ** 20, f"{size / 2**20:.1f} MiB"


def _copy_data(tmp_path, change):
    """A copy of the data under tmp_path with change(arrays, manifest) applied."""
    arrays = {k: np.array(DATA[k]) for k in DATA.files}
    manifest = json.loads(json.dumps(MANIFEST))
    change(arrays, manifest)
    np.savez_compressed(tmp_path / "km_tensorcore.npz", **arrays)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def test_replay_reports_a_regression_and_a_new_match(tmp_path):
    def change(arrays, manifest):
        arrays["V100/fp16/d_fp32"][7] ^= 1  # one flipped bit in a claimed set
        manifest["open"]["B200/fp8_e5m2/fp16"]["mismatches"] = 758  # an open count that moved
        manifest["sets"] = [s for s in manifest["sets"] if s["gpu"] in ("V100", "B200")]
    res = {f"{r.gpu}/{r.fmt}/{r.out_fmt}": r for r in replay_measured(_copy_data(tmp_path, change))}
    assert res["V100/fp16/fp32"].mismatches == 1 and res["V100/fp16/fp32"].status == "REGRESSED"
    assert res["V100/fp16/fp32"].first[0][0] == 7
    assert res["B200/fp8_e5m2/fp16"].status.startswith("open, count CHANGED")
    assert res["V100/fp16/fp16"].ok and res["B200/fp8_e4m3/fp16"].ok
    assert "REGRESSED" in format_measured(list(res.values()), show=2, root=tmp_path)


def test_replay_reports_an_open_set_that_now_matches(tmp_path):
    def change(arrays, manifest):
        manifest["open"]["V100/fp16/fp32"] = {"mismatches": 5, "note": "pretend"}
        manifest["sets"] = [s for s in manifest["sets"] if s["gpu"] == "V100"]
    res = replay_measured(_copy_data(tmp_path, change))
    r = next(r for r in res if r.out_fmt == "fp32")
    assert not r.ok and r.status.startswith("NOW MATCHES")


def test_cli_gpu_report_shows_the_measured_data(capsys):
    from floatfmt.cli import main
    assert main(["gpu-report", "--show", "0"]) == 0
    out = capsys.readouterr().out
    assert "measured tensor-core output" in out and "B200" in out
    assert "fixture cpu-torch" in out  # beside the committed capture fixtures
    assert replay_measured(ROOT / "nothing-here") == []
