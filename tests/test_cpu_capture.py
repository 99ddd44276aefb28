"""``python -m floatfmt.cpu.capture``: the C file compiles (for every unit, whatever this CPU
has), the Python side records what it can where the instructions are unavailable, its
file replays through ``floatfmt.cpu.compare`` / ``floatfmt hw-report``, and, on a CPU with
the units, a live capture reproduces bit for bit (skipped with the missing flags named
elsewhere; a missing unit is never a failure)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from floatfmt.cpu import capture, compare

MODEL, FLAGS = capture.cpu_flags()
MISSING = capture.missing_flags(FLAGS)
X86 = capture.platform.machine().lower() in ("x86_64", "amd64")


@pytest.mark.skipif(not X86 or shutil.which("cc") is None,
                    reason="units.c is x86-64 code and needs a C compiler (cc)")
def test_units_c_compiles_for_every_unit(tmp_path):
    """The target attributes let one file hold every unit, compiled on any x86-64 CPU."""
    lib = capture.build_library(str(tmp_path))
    for name in ("ff_amx_request", "ff_tdpbf16ps", "ff_tdpb", "ff_vdpbf16ps",
                 "ff_cvtneps2bf16", "ff_fp16_ops"):
        assert hasattr(lib, name), name
    # also with the units' -m flags, as the README's capture was built
    flags = ["-mavx512f", "-mavx512bw", "-mavx512bf16", "-mavx512fp16", "-mamx-tile",
             "-mamx-bf16", "-mamx-int8"]
    r = subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-c", *flags,
                        str(capture.Path(capture.__file__).with_name("units.c")),
                        "-o", str(tmp_path / "u.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_missing_flags_names_them():
    assert capture.missing_flags(set()) == {s: list(f) for s, f in capture.FLAGS.items()}
    assert capture.missing_flags({"avx512f", "avx512_bf16"}) == {
        "amx_bf16": ["amx_tile", "amx_bf16"], "amx_int8": ["amx_tile", "amx_int8"],
        "fp16": ["avx512_fp16"]}


def test_capture_without_the_units_records_what_it_can(tmp_path):
    """With no unit flags, the capture says which are missing and records only torch.mm
    (when torch is there); the file replays section by section."""
    torch = pytest.importorskip("torch", reason="the torch section needs torch")
    log = []
    rec = capture.capture(tmp_path, tiles=1, lanes=32, flags=set(),
                          shapes=((16, 16, 32), (5, 3, 40)), log=log.append)
    assert any("amx_bf16: skipped, this CPU lacks amx_tile amx_bf16" in s for s in log)
    assert not any(k.startswith(("amx_", "dp_", "cvt_", "fp16_")) for k in rec)
    saved = np.load(tmp_path / "cpu_capture.npz")
    assert len(saved["missing"]) == 5 and str(saved["torch_version"]) == torch.__version__
    rows = compare.replay(tmp_path / "cpu_capture.npz")
    assert [r.section for r in rows] == ["torch_mm 16x16x32", "torch_mm 5x3x40"]
    assert [r.outputs for r in rows] == [256, 15]
    if "amx_bf16" not in MISSING:  # torch.mm runs on AMX here: the model must hold
        assert sum(r.mismatches for r in rows) == 0


def test_hw_report_replays_the_committed_fixture(capsys):
    from floatfmt.cli import main
    assert main(["hw-report"]) == 0
    out = capsys.readouterr().out
    assert "amx_bf16" in out and "every output reproduced" in out
    assert "148480 outputs       0 differ" in out


@pytest.mark.skipif(bool(MISSING) or shutil.which("cc") is None,
                    reason=f"live CPU capture needs AMX and AVX512-BF16/FP16 and cc; this CPU "
                           f"({MODEL or 'unknown'}) lacks: "
                           + "; ".join(f"{s}: {' '.join(v)}" for s, v in MISSING.items()))
def test_live_capture_reproduces(tmp_path):
    """On a CPU with every unit: capture now (other seed, small), replay: 0 mismatches."""
    rec = capture.capture(tmp_path, tiles=2, lanes=256, seed=int(np.random.SeedSequence().entropy % 2 ** 31),
                          log=lambda s: print(s, file=sys.stderr))
    assert "amx_bf16_d" in rec
    rows = compare.replay(tmp_path / "cpu_capture.npz")
    print(compare.format_results("live", rows))
    assert [r for r in rows if r.mismatches] == []
