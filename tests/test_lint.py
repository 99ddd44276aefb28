"""ruff over the package, the tests, the benchmarks and the docs scripts (rules in
pyproject.toml: pyflakes and syntax errors). Required in CI; skipped with a reason where
ruff is not installed outside CI."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    try:
        import ruff  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    exe = shutil.which("ruff") or os.path.join(os.path.dirname(sys.executable), "ruff")
    run = subprocess.run([exe, "check", "floatfmt", "tests", "benchmarks", "docs"], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
