"""Lint and types, required in CI (skipped with a reason where the tool is not installed
outside CI): ruff over the package, the tests, the benchmarks and the docs scripts (rules
in pyproject.toml), mypy over the package ([tool.mypy] in pyproject.toml), and full
annotations on the public API."""

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


def test_mypy_is_clean():
    """mypy over the package with the settings of pyproject.toml ([tool.mypy]): no errors."""
    try:
        import mypy  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def _unannotated(obj) -> list[str]:
    """The parameters (and ``return``) of a callable that carry no annotation; for a
    class, those of its ``__init__`` (``self`` aside)."""
    import inspect

    fn = obj.__init__ if inspect.isclass(obj) else obj
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if inspect.isclass(obj):
        params = params[1:]
    missing = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_public_api_is_fully_annotated():
    """Every callable of ``floatfmt.__all__``: each parameter and the return annotated
    (classes: their constructor), so ``py.typed`` gives users real types."""
    import floatfmt

    bad = []
    for name in floatfmt.__all__:
        obj = getattr(floatfmt, name)
        if not callable(obj):
            continue
        missing = _unannotated(obj)
        if missing:
            bad.append(f"{getattr(obj, '__module__', '?')}.{name}: {', '.join(missing)}")
    assert not bad, "public callables with unannotated parameters or return:\n" + "\n".join(sorted(bad))
