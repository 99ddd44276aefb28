"""``next_up``, ``next_down`` and ``ulp`` on tensors: the device (namespace) code on CPU
tensors under ``force_namespace`` equal to the numpy path element for element, for
every registry format, P3109 formats and custom ones, on every code of the format
(16 bits or fewer), the edges around and past its range, and random float64 over
the whole double range; results are float64 tensors on the input's device."""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.backend.dispatch import force_namespace
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")
pytestmark = pytest.mark.usefixtures("torch_one_thread")

FUNCS = [ff.next_up, ff.next_down, ff.ulp]
CUSTOM = [ff.Format("e3m0", 3, 0), ff.Format("u5m2", 5, 2, signed=False),
          ff.Format("w11m20", 11, 20), ff.Format("e4m3_sat", 4, 3, inf=False, nan="all_ones")]
FORMATS = [ff.get_format(n) for n in ff.formats() + ff.p3109_formats()[:6]] + CUSTOM


@np.errstate(over="ignore")
def _inputs(f: ff.Format) -> np.ndarray:
    rng = np.random.default_rng(f.bits * 7 + f.mbits)
    codes = ff.values(f) if f.bits <= 16 else rng.standard_normal(2000)
    top, tiny = f.max, f.smallest_subnormal if f.kind == "float" else 1.0
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, top, -top, np.nextafter(top, np.inf),
                      top * 2, -top * 2, tiny, -tiny, tiny / 2, tiny * 1.5, 5e-324, -5e-324,
                      1.7e308, -1.7e308, 0.5, -0.5, 1.0, 3.0])
    wide = np.ldexp(rng.random(3000) - 0.5, rng.integers(-1075, 1024, 3000))
    mids = (codes[:-1] + codes[1:]) / 2 if codes.size > 1 else codes
    with np.errstate(over="ignore"):
        return np.concatenate([codes, -codes, mids, edges, wide, rng.standard_normal(500) * top])


@pytest.mark.parametrize("f", FORMATS, ids=lambda f: getattr(f, "name", str(f)))
def test_device_code_equals_numpy_path(f):
    x = _inputs(f)
    with np.errstate(all="ignore"):
        bad = {}
        for fn in FUNCS:
            want = fn(x, f)
            with force_namespace():
                got = fn(torch.from_numpy(x), f)
            assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
            assert got.shape == want.shape
            bad[fn.__name__] = int(mismatches(got.numpy(), want).sum())
    assert bad == {fn.__name__: 0 for fn in FUNCS}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "float8_e4m3fn"])
def test_device_code_takes_every_input_dtype(dtype):
    """Narrow tensors are read exactly (no rounding on the way in) on both paths."""
    x = torch.linspace(-300, 300, 1001, dtype=torch.float64).to(getattr(torch, dtype))
    for fn in FUNCS:
        want = fn(x, "fp8_e4m3")
        with force_namespace():
            got = fn(x, "fp8_e4m3")
        assert got.dtype == torch.float64
        assert int(mismatches(got.numpy(), want.numpy()).sum()) == 0, fn.__name__


def test_zero_dim_and_non_contiguous():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]], dtype=torch.float64).T[::2]
    for fn in FUNCS:
        with force_namespace():
            got = fn(x, "bf16")
            got0 = fn(torch.tensor(1.0, dtype=torch.float64), "fp16")
        assert got.shape == x.shape and got0.shape == ()
        assert int(mismatches(got.numpy(), fn(x.numpy(), "bf16")).sum()) == 0
        assert float(got0) == fn(1.0, "fp16")


@pytest.mark.parametrize("name", ["fp4_e2m1", "fp6_e3m2", "int4", "fp8_e4m3"])
def test_pack_and_unpack_keep_tensors(name):
    """pack / unpack on CPU tensors give uint8 tensors holding what the numpy path gives
    for the same codes; unpack(pack(c)) is c."""
    f = ff.get_format(name)
    c = torch.from_numpy(np.random.default_rng(3).integers(0, 1 << f.bits, 37).astype(np.uint8))
    p = ff.pack(c, name, bitorder="big")
    assert isinstance(p, torch.Tensor) and p.dtype == torch.uint8
    assert np.array_equal(p.numpy(), ff.pack(c.numpy(), name, bitorder="big"))
    back = ff.unpack(p, name, (37,), bitorder="big")
    assert isinstance(back, torch.Tensor) and torch.equal(back.to(torch.int64), c.to(torch.int64))


def test_classify_refuses_tensors_with_the_way_out():
    with pytest.raises(TypeError, match=r"cannot hold.*cpu\(\)\.numpy\(\)"):
        ff.classify(torch.ones(3), "fp16")


@pytest.mark.parametrize("dtype", ["float8_e8m0fnu", "float32", "bfloat16", "bool"])
def test_pack_names_the_dtype_it_refuses(dtype):
    """Float and bool tensors are not codes: the TypeError names the tensor's own dtype
    (not the float64 it would be widened to on the way to the numpy kernels)."""
    t = torch.ones(2).to(getattr(torch, dtype))
    for call in (lambda: ff.pack(t, "fp4_e2m1"), lambda: ff.unpack(t, "fp4_e2m1", (2,))):
        with pytest.raises(TypeError, match=f"integer tensor.*not torch.{dtype}"):
            call()


WIDTHS = ["uint1", "int2", "e2m0", "fp4_e2m1", "e2m2", "fp6_e2m3", "e3m3", "fp8_e4m3"]


@pytest.mark.parametrize("name", WIDTHS)
@pytest.mark.parametrize("order", ["little", "big"])
def test_pack_unpack_device_code_equals_numpy(name, order):
    """The device code of pack / unpack writes the bytes the numpy path writes, for every
    code width 1..8, both bit orders and lengths that end inside a group; unpack reads
    them back; a wrong length, non-zero padding and out-of-range codes raise the same
    errors on both paths."""
    f = ff.get_format(name)
    rng = np.random.default_rng(f.bits)
    for n in (0, 1, 2, 3, 5, 7, 8, 9, 31, 64, 101):
        c = rng.integers(0, 1 << f.bits, n).astype(np.uint8)
        want = ff.pack(c, name, bitorder=order)
        with force_namespace():
            got = ff.pack(torch.from_numpy(c).reshape(-1, 1) if n else torch.from_numpy(c), name,
                          bitorder=order)
            back = ff.unpack(got, name, (n,), bitorder=order)
        assert got.dtype == torch.uint8 and np.array_equal(got.numpy(), want)
        assert back.dtype == torch.uint8 and np.array_equal(back.numpy(), c)
    errors = [lambda m: m.pack(np.array([1 << f.bits]), name),
              lambda m: m.unpack(np.zeros(3, np.uint8), name, (64,), bitorder=order)]
    if f.bits < 8:  # a padding bit set in the last byte of 3 codes
        pad = np.zeros(-(-3 * f.bits // 8), np.uint8)
        pad[-1] = 0xFF
        errors.append(lambda m: m.unpack(pad, name, (3,), bitorder=order))
    for call in errors:
        with pytest.raises(ValueError) as host:
            call(_Path(False))
        with pytest.raises(ValueError) as dev:
            call(_Path(True))
        assert str(host.value) == str(dev.value)


class _Path:
    """ff.pack / ff.unpack on numpy arrays, or on CPU tensors through the device code."""

    def __init__(self, device: bool):
        self.device = device

    def _run(self, fn, data, *args, **kw):
        if not self.device:
            return fn(data, *args, **kw)
        with force_namespace():
            return fn(torch.from_numpy(np.asarray(data)), *args, **kw)

    def pack(self, codes, name, **kw):
        return self._run(ff.pack, codes, name, **kw)

    def unpack(self, data, name, shape, **kw):
        return self._run(ff.unpack, data, name, shape, **kw)
