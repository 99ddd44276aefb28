"""The namespace (device) code's costs that a GPU feels, and the exact helpers behind them.

* ``ff.cast`` of a tensor through the namespace code (what CUDA runs; CPU tensors under
  ``force_namespace``) reads nothing back to the host: no ``bool(t.any())`` /
  ``t.item()`` (each one stalls a GPU until its queue drains and stops
  ``torch.compile(fullgraph=True)``), for every format, overflow policy and rounding
  mode, with ftz and daz, from float64 and float32 tensors.  Counted by a ``TorchDispatchMode`` (``aten._local_scalar_dense`` is the op
  every host read goes through).
* ``_xp``'s bit-built powers of two equal ``math.ldexp`` for every exponent (the clamps
  stated in the docstring included), and its ``isfinite`` / ``signed`` equal torch's and
  numpy's on the special values.
The bits of every cast are compared with the numpy path in tests/test_torch.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.backend.dispatch import force_namespace
from floatfmt.core.rounding import MODES, STOCHASTIC

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from test_cast_oracle import CUSTOM, fmt_of  # noqa: E402
from test_torch import policies  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


class HostReads(TorchDispatchMode):
    """Counts the ops that read a tensor's value back to the host."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ == "_local_scalar_dense":
            self.n += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", ff.formats() + CUSTOM)
def test_cast_on_the_device_path_reads_nothing_back(name):
    f = fmt_of(name)
    x = np.array([0.0, -0.0, 1.0, -1.5, 3.0e-300, -5e-324, 1e300, -1e300, np.inf, -np.inf,
                  np.nan, 448.0, 465.0, -70000.0, 2.0 ** -140, 0.1, 127.5, -128.5])
    t = torch.from_numpy(x)
    reads = {}
    for pol in policies(f):
        for mode in MODES:
            kw = {}
            if mode in STOCHASTIC:
                kw = dict(rng=torch.Generator().manual_seed(1),
                          sr_bits=None if mode == "stochastic" else 4)
            for ftz, daz, src in ((False, False, t), (True, True, t),
                                  (False, False, t.to(torch.float32))):
                counter = HostReads()
                with force_namespace(), counter:
                    ff.cast(src, f, mode, pol, ftz=ftz, daz=daz, **kw)
                if counter.n:
                    reads[(pol, mode, ftz, daz, str(src.dtype))] = counter.n
    assert reads == {}


def test_pow2_equals_ldexp_for_every_exponent():
    from floatfmt.backend.namespace import namespace
    e = torch.arange(-1300, 1300, dtype=torch.int64)
    xp = namespace(e)
    want = torch.tensor([math.ldexp(1.0, min(max(int(k), -1074), 1023)) for k in e],
                        dtype=torch.float64)
    assert torch.equal(xp.pow2(e), want)
    n = torch.arange(-1022, 1024, dtype=torch.int64)
    assert torch.equal(xp.pow2_normal(n),
                       torch.tensor([math.ldexp(1.0, int(k)) for k in n], dtype=torch.float64))
    # ldexp (two multiplies by normal powers) rounds once, subnormal results included
    x = torch.tensor([1.5, -3.0, 2.0 ** -1000, 1.0 + 2.0 ** -52, 1e300], dtype=torch.float64)
    for k in (-1100, -1074, -60, 0, 7, 1000, 2000):
        with np.errstate(over="ignore"):
            want = np.ldexp(x.numpy(), k)
        got = xp.ldexp(x, k).numpy()
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), k


def test_isfinite_and_signed_match_torch_and_numpy():
    from floatfmt.backend.namespace import namespace
    v = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -1e308])
    t = torch.from_numpy(v)
    xp = namespace(t)
    assert torch.equal(xp.isfinite(t), torch.isfinite(t))
    for s in (0.0, 448.0, np.inf, np.nan):
        want = np.copysign(s, v)
        got = xp.signed(s, t).numpy()
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), s
        got = xp.copysign(s, t).numpy()
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), s
    assert xp.const(2.0, t) is xp.const(2.0, t)  # one 0-d tensor per value and device
    assert xp.copysign(t > 0, t).dtype == torch.float64


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                  "float8_e5m2fnuz"])
@pytest.mark.parametrize("forced", [False, True])
def test_float8_tensor_codes_widen_as_ml_dtypes_does(name, forced):
    """All 256 codes of a torch float8 tensor give the float64 bits ml_dtypes gives for the
    same codes (the numpy path's intake), NaN's sign included (the fnuz types' one NaN,
    code 0x80, is negative there; torch widens it to +NaN): casts and encodes equal."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    codes = np.arange(256, dtype=np.uint8)
    a = codes.view(getattr(ml_dtypes, name))
    t = torch.from_numpy(codes).view(getattr(torch, name))
    with force_namespace(forced):
        for fmt in ("fp16", "bf16", "fp8_e5m2", "fp32"):
            assert np.array_equal(ff.encode(t, fmt).numpy(), ff.encode(a, fmt)), fmt
            got = ff.cast(t, fmt, dtype=torch.float64).numpy()
            want = ff.cast(a, fmt, dtype=np.float64)
            assert np.array_equal(got.view(np.int64), want.view(np.int64)), fmt
