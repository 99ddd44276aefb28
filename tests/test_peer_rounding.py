"""floatfmt.teach.peer_rounding: the probe of how the installed ml_dtypes / torch convert float64.

The probe looks at one input; here its verdict is checked against many inputs whose
float32 rounding lies on a midpoint of the target format (where rounding once and
rounding twice differ), and against the library called directly.  Nothing here asserts
which way a peer rounds: only that the probe says what the peer does.
"""

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.teach.peer_rounding import CASES, probe, report


def _midpoint_cases(fmt: str, n: int = 2000) -> np.ndarray:
    """float64 values just off a midpoint m of ``fmt`` whose float32 rounding is m itself."""
    rng = np.random.default_rng(7)
    f = ff.get_format(fmt)
    v = ff.values(f)
    v = v[np.isfinite(v) & (np.abs(v) >= f.smallest_normal)]
    lo = rng.choice(v[:-1], n)
    m = (lo + ff.next_up(lo, f)) / 2  # exact midpoints (float32 holds them)
    off = np.ldexp(rng.uniform(0.05, 0.45, n), np.frexp(m)[1] - 24) * rng.choice([-1.0, 1.0], n)
    x = m + off  # within half a float32 ulp of m: float32 rounds back to m
    keep = (x.astype(np.float32).astype(np.float64) == m) & (x != m)
    return x[keep]


def test_the_cases_round_differently_once_and_twice():
    for fmt, x in CASES.items():
        assert ff.cast(x, fmt) != ff.cast(ff.cast(x, "fp32"), fmt), fmt


def test_midpoint_cases_separate_once_from_twice():
    x = _midpoint_cases("bf16")
    assert x.size > 1000
    assert (ff.cast(x, "bf16") != ff.cast(ff.cast(x, "fp32"), "bf16")).mean() > 0.3


@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3"])
def test_ml_dtypes_probe_matches_ml_dtypes_on_many_cases(fmt):
    import ml_dtypes as md
    dt = {"bf16": md.bfloat16, "fp8_e4m3": md.float8_e4m3fn}[fmt]
    p = probe("ml_dtypes", fmt)
    assert p.library == "ml_dtypes" and p.version == md.__version__ and p.x == CASES[fmt]
    assert p.value == float(np.float64(p.x).astype(dt)) and p.rounds_once != p.rounds_twice
    x = _midpoint_cases(fmt)
    theirs = x.astype(dt).astype(np.float64)
    want = ff.cast(x, fmt) if p.rounds_once else ff.cast(ff.cast(x, "fp32"), fmt)
    assert (theirs == want).all()
    line = report(("ml_dtypes",), fmt)[0]
    assert line.startswith(f"ml_dtypes {md.__version__}: ") and p.verdict() in line


def test_torch_probe_matches_torch_on_many_cases():
    torch = pytest.importorskip("torch")
    p = probe("torch", "bf16")
    assert p.version == torch.__version__ and p.rounds_once != p.rounds_twice
    x = _midpoint_cases("bf16")
    theirs = torch.tensor(x, dtype=torch.float64).to(torch.bfloat16).to(torch.float64).numpy()
    want = ff.cast(x, "bf16") if p.rounds_once else ff.cast(ff.cast(x, "fp32"), "bf16")
    assert (theirs == want).all()
    print(report(("torch",))[0])


def test_probe_refuses_what_it_cannot_probe():
    with pytest.raises(ValueError, match="'ml_dtypes' or 'torch'"):
        probe("jax")
    with pytest.raises(ValueError, match="fmt must be one of"):
        probe("ml_dtypes", "fp16")
