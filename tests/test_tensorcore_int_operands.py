"""Integer-input tensor-core units (every ``*/int8`` preset, found in the registry at run
time) on every path: numpy arrays, CPU tensors (host kernels) and CPU tensors under
``force_namespace`` (the device code CUDA tensors run).

The class: an operand's cast to the unit's integer format.  NaN has no integer code
(``ff.encode(nan, "int8")`` refuses it), so a NaN operand of ``matmul`` / ``dot`` with an
integer model or of ``mma`` with an integer preset must raise the same ValueError on
every path, whatever the rounding mode, overflow policy, shape or place of the NaN
(before the fix the numpy path gave one silent number, the device another).  Every
other operand, +-Inf and values past the range included, is cast as ``ff.cast`` casts
it to an integer format (+-Inf to the extremes under every policy the format takes) and
the products are summed exactly and wrapped to int32: checked against Python integer
arithmetic on operands rounded by Fraction arithmetic (the oracle below), on every path.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.backend.dispatch import force_namespace

try:
    import torch
except ImportError:  # the numpy path is still checked
    torch = None

INT_PRESETS = sorted(p for p, m in ff.tensorcore_models().items()
                     if m.block_fmt is None and ff.get_format(m.fmt).kind == "int")
PATHS = ["numpy"] + (["tensor", "namespace"] if torch is not None else [])
FUNCS = ("matmul", "dot", "mma")
DET = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
OVERFLOWS = (None, "saturate", "wrap")

if torch is not None:
    pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_registry_has_integer_presets():
    assert INT_PRESETS, "no integer tensor-core preset left: this file tests nothing"


# ------------------------------------------------------------------ the oracle
def _round_int(x: float, mode: str) -> int:
    """x (finite float64) rounded to an integer in ``mode``, by Fraction arithmetic."""
    q = Fraction(x)
    lo = math.floor(q)
    if q == lo:
        return lo
    hi, half = lo + 1, q - lo
    if mode == "nearest_even":
        return lo if half < Fraction(1, 2) or (half == Fraction(1, 2) and lo % 2 == 0) else hi
    if mode == "nearest_away":
        return lo if half < Fraction(1, 2) or (half == Fraction(1, 2) and q < 0) else hi
    if mode == "toward_zero":
        return lo if q > 0 else hi
    if mode == "odd":
        return lo if lo % 2 else hi
    return hi if mode == "up" else lo


def oracle_cast(x: np.ndarray, fmt: str, mode: str, overflow) -> list:
    """Operand values as Python ints: +-Inf to the extremes; finite values rounded, then
    past the range clamped (saturate, the default) or wrapped modulo 2**bits."""
    f = ff.get_format(fmt)
    lo, hi = int(f.min), int(f.max)
    out = []
    for v in np.asarray(x, np.float64).reshape(-1).tolist():
        if math.isinf(v):
            out.append(hi if v > 0 else lo)
            continue
        i = _round_int(v, mode)
        if overflow == "wrap":
            i = (i - lo) % (hi - lo + 1) + lo
        else:
            i = min(max(i, lo), hi)
        out.append(i)
    return np.array(out, dtype=object).reshape(np.shape(x))


def _wrap32(v: int) -> int:
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def oracle(fn: str, a, b, c, fmt: str, mode: str, overflow) -> np.ndarray:
    """The exact integer result (Python ints, int32 wrap-around) as float64."""
    x, y = oracle_cast(a, fmt, mode, overflow), oracle_cast(b, fmt, mode, overflow)
    if fn == "dot":
        x, y = np.broadcast_arrays(x, y)
        r = (x * y).sum(-1)
    else:
        r = x.dot(y)
        if fn == "mma":
            r = r + np.array(c, dtype=np.int64).astype(object)
    return np.vectorize(lambda v: float(_wrap32(int(v))), otypes=[np.float64])(r)


# ------------------------------------------------------------------ the paths
def call(path: str, fn: str, preset: str, a, b, c=None, **opts):
    """(result as float64 numpy, None) or (None, the exception) of one call on one path."""
    m = ff.tensorcore_models()[preset]
    args = [a, b] + ([c] if fn == "mma" else [])
    if path != "numpy":
        args = [torch.from_numpy(np.array(v, np.float64)) for v in args]

    def go():
        if fn == "mma":
            return ff.mma(*args, m.fmt, preset)
        return getattr(ff, fn)(args[0], args[1], m.fmt, model=preset, **opts)
    try:
        with np.errstate(all="ignore"), force_namespace(path == "namespace"):
            r = go()
    except (ValueError, TypeError, NotImplementedError) as e:
        return None, e
    if path != "numpy":
        assert isinstance(r, torch.Tensor), f"{path}: array type in != out"
        r = r.numpy()
    return np.asarray(r, np.float64), None


def shapes(fn: str, L: int, rng) -> tuple[tuple, tuple, tuple | None]:
    K = int(rng.choice([1, L - 1, L, L + 1, 2 * L + 3]))
    M, N = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    if fn == "dot":
        return (M, K), ((K,) if rng.random() < 0.5 else (M, K)), None
    return (M, K), (K, N), (M, N)


def operands(shape: tuple, rng) -> np.ndarray:
    """Integers, ties and other fractions, zeros of both signs, +-Inf and values past
    int8's range (the magnitudes stay small enough that sums fit int32 and fp32)."""
    x = rng.integers(-140, 141, shape).astype(np.float64)
    pick = rng.random(shape)
    x = np.where(pick < 0.2, x + rng.choice([0.5, -0.5, 0.25, 0.75]), x)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 1e6, -1e6, 300.5, -129.5, 127.5])
    at = rng.random(shape) < 0.15
    return np.where(at, rng.choice(specials, shape), x)


# ------------------------------------------------------------------ the tests
@pytest.mark.parametrize("preset", INT_PRESETS)
@pytest.mark.parametrize("fn", FUNCS)
def test_nan_operand_refused_alike(preset, fn):
    """A NaN anywhere in a, in b, in both or in neither (random shapes, K around the
    model's L, random modes and overflow policies): a ValueError naming the format and
    the operand on every path, the same message; without a NaN, the oracle's number."""
    m = ff.tensorcore_models()[preset]
    rng = np.random.default_rng(sum(map(ord, preset + fn)))
    raised = 0
    for trial in range(24):
        sa, sb, sc = shapes(fn, m.L, rng)
        a, b = operands(sa, rng), operands(sb, rng)
        where = ("a", "b", "a and b", "")[trial % 4]
        for name, v in (("a", a), ("b", b)):
            if name in where.split(" and "):
                v.reshape(-1)[rng.choice(v.size, int(rng.integers(1, v.size + 1)),
                                         replace=False)] = np.nan
        c = None if sc is None else rng.integers(-1000, 1001, sc).astype(np.float64)
        opts: dict = {}
        mode, overflow = "nearest_even", None
        if fn != "mma":  # mma's casts are nearest-even; matmul / dot take options
            mode = DET[trial % len(DET)] if trial % 5 else "stochastic"
            overflow = OVERFLOWS[trial % len(OVERFLOWS)]
            opts = dict(rounding=mode, overflow=overflow)
            if mode == "stochastic":  # rng= with another mode is refused
                opts["rng"] = trial
        got = {p: call(p, fn, preset, a, b, c, **opts) for p in PATHS}
        for path, (r, err) in got.items():
            ctx = f"{preset} {fn} {path} trial {trial} nan in {where or 'nothing'}"
            if where:
                assert isinstance(err, ValueError), f"{ctx}: {r if err is None else err!r}"
                assert str(err) == (f"{m.fmt} has no NaN, but operand {where} of the "
                                    f"{m.name} unit {'are' if ' and ' in where else 'is'} "
                                    "NaN (replace NaN first, or use a floating-point model)"), ctx
                raised += 1
            elif mode != "stochastic":
                assert err is None, f"{ctx}: {err!r}"
                want = oracle(fn, a, b, c, m.fmt, mode, overflow)
                assert r.shape == want.shape and np.array_equal(r, want), \
                    f"{ctx}: {r} != {want}"
    assert raised == 18 * len(PATHS)


@pytest.mark.parametrize("preset", INT_PRESETS)
@pytest.mark.parametrize("overflow", OVERFLOWS)
def test_inf_and_out_of_range_operands_saturate(preset, overflow):
    """+-Inf operands are cast to the format's extremes (as ``ff.cast`` / ``ff.encode``
    do), under every overflow policy the integer format takes; values past the range
    saturate or wrap by the policy; the same numbers on every path, the oracle's."""
    m = ff.tensorcore_models()[preset]
    f = ff.get_format(m.fmt)
    for v in (np.inf, -np.inf):  # the cast itself: +-Inf -> the extremes, encode alike
        assert ff.cast(v, m.fmt, overflow=overflow) == (f.max if v > 0 else f.min)
    rng = np.random.default_rng(sum(map(ord, preset + str(overflow))))
    a = np.array([[np.inf, 1.0, -np.inf, 2.0, 1e9, -300.0]] * 2)
    a[1] = [-np.inf, 0.0, np.inf, 1.0, -1e9, 300.0]
    b = np.array([[1.0, -1.0], [3.0, 3.0], [2.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, 2.0]])
    for fn, x, y in (("matmul", a, b), ("dot", a, b[:, 0]), ("matmul", operands((3, 40), rng),
                                                            operands((40, 2), rng))):
        want = oracle(fn, x, y, None, m.fmt, "nearest_even", overflow)
        for path in PATHS:
            r, err = call(path, fn, preset, x, y, overflow=overflow)
            assert err is None, f"{preset} {fn} {path}: {err!r}"
            assert np.array_equal(r, want), f"{preset} {fn} {path} {overflow}: {r} != {want}"
