"""The lean T-FDPA strategy (``floatfmt.arith.matrixunit.tfdpa``, what tensors take; zero operands marked by their
exponent instead of masking every product, non-finite products left to the special
lanes, truncated terms summed as integers and scaled once) gives the same bits as the
general step it replaces, for every preset of the registry (read at run time) that
takes it and for custom models, on the edge data of tests/test_torch_tensorcore.py
(zeros of both signs, +-Inf, NaN, subnormals, values past the input range, ties,
cancellation, K = 0) and accumulators with Inf / NaN.  tests/test_torch_tensorcore.py
proves both equal to the numpy path too; this file pins the two device variants to each
other directly, so that a difference is found where it arises (on numpy arrays:
tests/test_tfdpa_strategies.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
import floatfmt.arith.matrixunit.tensorcore as td
from floatfmt.arith.matrixunit.tfdpa import lean_ok
from floatfmt.backend.dispatch import force_namespace
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

from tests.test_torch_tensorcore import _c_for, _seed, cases  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")

MODELS = ff.tensorcore_models()
LEAN = sorted(p for p, m in MODELS.items() if m.block_fmt is None
              and lean_ok(m, ff.get_format(m.fmt)))
CUSTOM = [MODELS["h100/bf16"].replace(c_entry="after"), MODELS["ada/fp16"].replace(zero_exponent=-20),
          MODELS["h100/fp8_e4m3"].replace(overflow="saturate"),
          MODELS["a100/tf32"].replace(tf32_operands="rne"),
          MODELS["h100/fp16"].replace(acc_fmt="fp16", step_fmt=None, rounding="nearest_even")]


def test_every_nvidia_preset_is_lean_and_far_floors_are_not():
    nvidia = sorted(p for p, m in MODELS.items() if m.block_fmt is None
                    and m.algorithm == "t_fdpa" and ff.get_format(m.fmt).kind == "float")
    assert nvidia and LEAN == nvidia
    h = MODELS["h100/bf16"]
    assert not lean_ok(h.replace(zero_exponent=-1000), ff.get_format("bf16"))  # 2**scale subnormal
    assert not lean_ok(MODELS["mi300/bf16"], ff.get_format("bf16"))  # AMD steps: their own code


def _run(fn, *args, lean: bool):
    tensors = [torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
               for v in args]
    saved = td.lean_ok
    if not lean:
        td.lean_ok = lambda m, f: False
    try:
        with force_namespace(), np.errstate(all="ignore"):
            return fn(*tensors)
    finally:
        td.lean_ok = saved


def zero_cases(fmt: str, L: int, rng) -> list:
    """Zero factors (both signs) beside the largest and the smallest values of fmt, every
    other product small with low bits that a raised e_max would truncate: a zero product
    that set e_max (or a zero exponent floor crossed wrongly) changes the result."""
    f = ff.get_format(fmt)
    K = 2 * L + 3
    out = []
    for big in (f.max, f.smallest_subnormal, 2.0 ** f.emin):
        a = (1 + rng.integers(1, 8, (3, K)) * 2.0 ** -f.mbits) * 2.0 ** rng.integers(-4, 1, (3, K))
        b = (1 + rng.integers(1, 8, (K, 3)) * 2.0 ** -f.mbits) * 2.0 ** rng.integers(-4, 1, (K, 3))
        zeros = rng.random((3, K)) < 0.3
        a[zeros] = rng.choice([0.0, -0.0], int(zeros.sum()))
        b[np.nonzero(zeros)[1], rng.integers(0, 3, int(zeros.sum()))] = big
        out.append((a, b))
        out.append((b.T.copy(), a.T.copy()))  # the zeros in b
    return out


@pytest.mark.parametrize("model", LEAN + CUSTOM, ids=lambda m: m if isinstance(m, str) else m.name + "*")
def test_lean_step_equals_general_step(model):
    m = MODELS[model] if isinstance(model, str) else model
    fmt = "fp32" if m.fmt == "tf32" else m.fmt
    rng = np.random.default_rng(_seed(m.name) + 7)
    for i, (a, b) in enumerate(cases(m.fmt, rng) + zero_cases(m.fmt, m.L, rng)):
        def mm(x, y):
            return ff.matmul(x, y, fmt, m.acc_fmt, model=m, rounding=("nearest_even", "down")[i % 2])
        got, want = _run(mm, a, b, lean=True), _run(mm, a, b, lean=False)
        assert int(mismatches(got.numpy(), want.numpy()).sum()) == 0, f"matmul case {i}"
        with np.errstate(all="ignore"):
            host = mm(a, b)  # and the numpy kernels (the oracle-tested path)
        assert int(mismatches(got.numpy(), np.asarray(host)).sum()) == 0, f"numpy case {i}"
        if a.ndim >= 2 and b.ndim >= 2:
            shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
            c = _c_for(shape, m.acc_fmt, rng, False)
            c.reshape(-1)[:3] = [np.inf, np.nan, -np.inf][:c.size]

            def mma(x, y, z):
                return ff.mma(x, y, z, fmt, m, m.acc_fmt)
            got, want = _run(mma, a, b, c, lean=True), _run(mma, a, b, c, lean=False)
            assert int(mismatches(got.numpy(), want.numpy()).sum()) == 0, f"mma case {i}"
