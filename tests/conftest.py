"""Shared test helpers and hypothesis strategies.

Test modules import what they need by name (``from conftest import same``): pytest puts
``tests/`` on ``sys.path`` and loads this file once as the module ``conftest``.

Comparisons (the one rule every oracle test uses: equal values with equal signs of zero,
or NaN on both sides; NaN payloads and signs are not compared)
    same(a, b)         elementwise mask (arrays or scalars, as float64)
    all_same(a, b)     True when ``same`` holds everywhere
    same_value(a, b)   the same rule for two Python floats
References
    mpfr               the MPFR oracle (``oracles/mpfr.py``, through gmpy2)
    FLOAT_DTYPES       floatfmt name -> the ml_dtypes / numpy float dtype with that value set
    ML_DTYPES_LACKS    registered formats whose ml_dtypes type the installed ml_dtypes lacks (why)
    INT_DTYPES         the same for integer formats
    REFERENCE_FLOAT_DTYPES   FLOAT_DTYPES with fp64 and fp32
    REFERENCE_DTYPES   REFERENCE_FLOAT_DTYPES and INT_DTYPES
Mode lists
    DET_MODES          the six deterministic rounding modes (as the oracle's ``mpfr.MODES``)
    ALL_MODES          those and ``stochastic``
Strategies (hypothesis)
    finite_floats, any_floats   Python floats without / with NaN and Inf
    format_names(names), det_modes
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from oracles.compare import mismatches
from oracles.reference_dtypes import FLOAT_DTYPES, INT_DTYPES, ML_DTYPES_LACKS

try:
    from oracles import mpfr
except ImportError:  # gmpy2 missing: only the modules that use the oracle fail, as before
    mpfr = None

__all__ = ["same", "all_same", "same_value", "mpfr", "FLOAT_DTYPES", "INT_DTYPES", "ML_DTYPES_LACKS", "REFERENCE_FLOAT_DTYPES", "REFERENCE_DTYPES",
           "DET_MODES", "ALL_MODES", "finite_floats", "any_floats", "format_names", "det_modes"]

REFERENCE_FLOAT_DTYPES = {"fp64": np.float64, "fp32": np.float32, **FLOAT_DTYPES}
REFERENCE_DTYPES = {**REFERENCE_FLOAT_DTYPES, **INT_DTYPES}
DET_MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
ALL_MODES = (*DET_MODES, "stochastic")


def same(a, b) -> np.ndarray:
    """Elementwise: equal values with equal signs of zero, or both NaN."""
    return ~mismatches(a, b)


def all_same(a, b) -> bool:
    """``same`` everywhere (shapes broadcast as numpy does)."""
    return bool(np.all(same(a, b)))


def same_value(a: float, b: float) -> bool:
    """``same`` for two Python floats."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


try:
    from hypothesis import strategies as st
except ImportError:  # hypothesis missing: the property tests that need it fail, as before
    pass
else:
    finite_floats = st.floats(allow_nan=False, allow_infinity=False)
    any_floats = st.floats(allow_nan=True, allow_infinity=True)
    det_modes = st.sampled_from(DET_MODES)

    def format_names(names) -> st.SearchStrategy:
        """One of the given format names."""
        return st.sampled_from(list(names))


@pytest.fixture(scope="module")
def torch_one_thread():
    """One torch thread for a module of many small tensor calls (on a loaded machine
    torch's thread pool spends far more time waiting than computing); restored after.
    Use with ``pytestmark = pytest.mark.usefixtures("torch_one_thread")``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ------------------------------------------------------------------ the developer subset
#: Test files marked ``heavy``: a build, a browser, every notebook, exhaustive sweeps, long
#: oracle or hypothesis searches, subprocess runs.  ``python -m pytest -m "not slow and not
#: heavy"`` leaves them out (the developer subset, CONTRIBUTING.md); the default run, which
#: CI makes, runs every test, these included.  Each of these behaviours keeps fast tests
#: in the subset too (the oracle files have fast siblings: test_cast, test_ops, test_codec ...).
HEAVY_FILES = {
    "test_docs.py",               # the Sphinx site build (-W)
    "test_notebooks.py",          # executes every committed notebook
    "test_explain_browser.py",    # the explorer in a headless browser
    "test_lint.py",               # ruff and mypy over the package
    "test_exhaustive.py",         # every code of every format of at most 16 bits
    "test_cast_oracle.py",        # MPFR sweeps of every format, mode and policy
    "test_ops_oracle.py",         # MPFR sweeps of the arithmetic
    "test_torch_differential.py", # hypothesis: tensors against numpy
    "test_torch_sweep.py",        # tensor casts over many patterns
    "test_emulate_ddp.py",        # multi-process torch
    "test_course_speed.py",       # timing of the course checkers
}




def heavy_tests() -> set[str]:
    """``file::function`` names of ``tests/heavy_tests.txt``: long tests of files that are
    otherwise in the subset (every parametrisation of each function)."""
    from pathlib import Path

    text = (Path(__file__).parent / "heavy_tests.txt").read_text()
    return {ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")}


HEAVY_TESTS = heavy_tests()


def pytest_collection_modifyitems(config, items):
    """Mark ``heavy`` the tests of HEAVY_FILES and those HEAVY_TESTS names (selection only:
    nothing is skipped)."""
    heavy = pytest.mark.heavy
    for item in items:
        name = getattr(item, "originalname", None) or item.name
        if item.path.name in HEAVY_FILES or f"{item.path.name}::{name}" in HEAVY_TESTS:
            item.add_marker(heavy)
