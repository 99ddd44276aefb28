"""The kernels of a tensor-core model's K chain (``tensorcore.KERNELS``: numpy's fast
kernel and the ``"general"`` and ``"lean"`` strategies of the one T-FDPA step,
``tfdpa._fused``) give the same bits on numpy arrays, for every preset that admits the
lean strategy (read from the registry at run time) and custom models, on edge data:
zeros of both signs beside the extremes, +-Inf, NaN, subnormals, ties, K = 0, and
accumulators holding Inf / NaN.  The general strategy is the oracle-tested reference
(tests/test_tensorcore.py, tests/test_mma.py against tests/oracles/tensorcore_slow.py);
tests/test_tensorcore_fast.py pins the fast kernel to it on finite data; tensors take
the lean one (tests/test_torch_tensorcore_lean.py)."""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith.matrixunit import tensorcore as tc
from floatfmt.arith.matrixunit.tfdpa import exponents, lean_ok
from tests.oracles.compare import mismatches

MODELS = ff.tensorcore_models()
LEAN = sorted(p for p, m in MODELS.items() if m.block_fmt is None
              and lean_ok(m, ff.get_format(m.fmt)))
CUSTOM = [MODELS["h100/bf16"].replace(c_entry="after"),
          MODELS["ada/fp16"].replace(zero_exponent=-20),
          MODELS["h100/fp8_e4m3"].replace(overflow="saturate"),
          MODELS["h100/fp16"].replace(acc_fmt="fp16", step_fmt=None, rounding="nearest_even")]


def _operands(fmt: str, shape, rng, special: bool):
    f = ff.get_format(fmt)
    e = rng.integers(f.emin - f.mbits, f.emax + 1, shape)
    v = (1 + rng.integers(0, 1 << min(f.mbits, 20), shape) * 2.0 ** -min(f.mbits, 20)) \
        * 2.0 ** e.astype(float) * rng.choice([-1.0, 1.0], shape)
    v = np.asarray(ff.cast(v, fmt), np.float64)
    pick = rng.random(shape)
    v = np.where(pick < 0.15, rng.choice([0.0, -0.0], shape), v)
    v = np.where((pick > 0.15) & (pick < 0.2), f.max, v)
    v = np.where((pick > 0.2) & (pick < 0.25), f.smallest_subnormal or 2.0 ** f.emin, v)
    if special:
        v = np.where(pick > 0.98, rng.choice([np.inf, -np.inf, np.nan], shape), v)
    return v


def _chain(m, x, y, c, kernel):
    f = ff.get_format(m.fmt)
    with np.errstate(all="ignore"):
        return tc._chain_matmul(x, exponents(x, f), y, exponents(y, f), m, c, f, kernel=kernel)


@pytest.mark.parametrize("model", LEAN + CUSTOM,
                         ids=lambda m: m if isinstance(m, str) else m.name + "*")
def test_kernels_give_the_same_bits_on_numpy(model):
    m = MODELS[model] if isinstance(model, str) else model
    rng = np.random.default_rng(sum(map(ord, m.name)))
    bad = total = 0
    for K in (0, 1, m.L, 2 * m.L + 3):
        for special in (False, True):
            x = _operands(m.fmt, (2, 5, K), rng, special)
            y = _operands(m.fmt, (K, 6), rng, special)
            c = np.asarray(ff.cast(rng.normal(size=(2, 5, 6)) * 4.0, m.acc_fmt), np.float64)
            if special:
                c.reshape(-1)[:3] = [np.inf, np.nan, -np.inf]
            want = _chain(m, x, y, c, "general")
            kernels = ["lean"] + ([] if special else ["fast"])
            for kernel in kernels:
                if kernel == "fast" and not tc.fast_ok(x, y, m):
                    continue
                got = _chain(m, x, y, c, kernel)
                bad += int(mismatches(got, want).sum())
                total += want.size
    assert total > 0 and bad == 0, f"{bad} of {total} results differ"


def test_every_nvidia_float_preset_admits_the_lean_strategy():
    nvidia = sorted(p for p, m in MODELS.items() if m.block_fmt is None
                    and m.algorithm == "t_fdpa" and ff.get_format(m.fmt).kind == "float")
    assert nvidia and LEAN == nvidia


def test_choose_kernel_and_unknown_kernel():
    m = MODELS["h100/bf16"]
    f = ff.get_format("bf16")
    x, y = np.ones((2, 3)), np.ones((3, 2))
    assert tc.choose_kernel(x, y, m, f) == "fast"
    assert tc.choose_kernel(np.full((2, 3), np.inf), y, m, f) == "general"
    with pytest.raises(ValueError, match="lean"):
        tc._chain_matmul(x, exponents(x, f), y, exponents(y, f), m, None, f, kernel="leen")
