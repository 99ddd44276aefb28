"""`floatfmt tour`: runs fast and prints the key numbers, checked here against
numpy / ml_dtypes / Fraction arithmetic rather than floatfmt itself."""

import io
import os
import subprocess
import sys
import time
from fractions import Fraction

import ml_dtypes
import numpy as np

from floatfmt import cli
from floatfmt.teach.tour import DOUBLE_ROUNDING_X, run_tour

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tour_text():
    buf = io.StringIO()
    run_tour(file=buf)
    return buf.getvalue()


def _bf16_rne(x: float) -> float:
    """Correct float64 -> bf16 rounding by exact arithmetic (round() on a
    Fraction rounds ties to even)."""
    fx = Fraction(x)
    e = abs(fx).numerator.bit_length() - abs(fx).denominator.bit_length()
    if Fraction(2) ** e > abs(fx):
        e -= 1
    q = Fraction(2) ** (e - 7)
    return float(round(fx / q) * q)


def test_cli_tour_runs_under_ten_seconds():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "floatfmt.cli", "tour"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=60)
    elapsed = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    assert elapsed < 10, f"tour took {elapsed:.1f} s"
    assert "1. The formats" in r.stdout and "7. Double rounding" in r.stdout


def test_tour_mentions_the_key_numbers():
    t = _tour_text()
    # the format table
    for s in ("fp32", "tf32", "bf16", "fp8_e4m3", "fp8_e5m2", "65504", "448", "57344"):
        assert s in t
    # 0.1 in bf16 and fp16 (numpy / ml_dtypes convert the float32 0.1 exactly once here)
    assert repr(float(np.float16(0.1))) in t  # 0.0999755859375
    assert repr(float(np.float32(0.1).astype(ml_dtypes.bfloat16))) in t  # 0.10009765625
    # 1.0 + 0.0001: lost in fp16 and bf16, kept in fp32
    assert np.float16(1.0) + np.float16(1e-4) == np.float16(1.0)
    assert repr(float(np.float32(1.0) + np.float32(1e-4))) in t  # 1.000100016593933
    assert t.count("the update is LOST") == 2 and "the update survives" in t
    # 70000: inf in fp16, 70144 in bf16
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(70000))
    assert f"70000 -> {float(np.float32(70000).astype(ml_dtypes.bfloat16))!r}" in t  # 70144.0
    assert "70000 -> inf" in t
    # 1e-7 in fp16 is subnormal, and survives scaling by 2^16
    assert repr(float(np.float16(1e-7))) in t and "subnormal" in t
    assert repr(float(np.float16(1e-7 * 65536))) in t  # 0.00655364990234375
    # fp8_e4m3 at 448 / 464 / 480
    row = lambda x: next(l for l in t.splitlines() if l.split()[:1] == [str(x)])  # noqa: E731
    assert row(448).split()[1:3] == ["448.0", "448.0"]
    assert row(464).split()[1:3] == ["448.0", "448.0"]
    assert row(480).split()[1:3] == ["nan", "448.0"]
    assert float(np.float32(464).astype(ml_dtypes.float8_e4m3fn)) == 448.0  # ml_dtypes agrees


def test_tour_double_rounding_case():
    t = _tour_text()
    x = DOUBLE_ROUNDING_X
    theirs = float(np.float64(x).astype(ml_dtypes.bfloat16))
    right = _bf16_rne(x)
    assert theirs != right  # the case really is one ml_dtypes gets wrong
    assert f"astype(bfloat16) = {theirs!r}" in t
    assert f"ff.cast(x, 'bf16')                 = {right!r}" in t


def test_tour_figures_flag(tmp_path, capsys):
    assert cli.main(["tour", "--figures", "--out", str(tmp_path)]) == 0
    assert "Wrote 7 figures" in capsys.readouterr().out
    assert len(list(tmp_path.glob("*.png"))) == 7
