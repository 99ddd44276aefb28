"""Arithmetic, sums, dot and matrix products on torch tensors (issue 11 items 1, 7 and
"bad input"): a tensor in gives a tensor out on its device, element for element the
numpy path's result (NaN by class, the sign of zero counted), for every op, order
and tensor-core preset; and every kind of bad input raises an error that says what
was given and what is accepted (``floatfmt.backend.dispatch``).
"""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith.accumulate import ORDERS
from floatfmt.backend.dispatch import force_namespace
from floatfmt.core.rounding import MODES, STOCHASTIC
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

DETERMINISTIC = [m for m in MODES if m not in STOCHASTIC]
BINARY = ["add", "sub", "mul", "div", "minimum", "maximum"]
UNARY = ["sqrt", "neg", "abs"]
FORMATS = ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp32", "fp4_e2m1", "int8"]


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def data(shape, seed, spread=12, specials=True):
    """Random float64 values over 2*spread binades, both signs, with zeros, Inf and NaN."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))
    flat = x.reshape(-1)
    if specials and flat.size >= 8:
        flat[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300]
        rng.shuffle(flat)
    return x


def finite_for(name, x):
    """Formats without NaN (fp4, int8) refuse NaN operands and invalid results: give
    them finite, nonnegative data where an op could make NaN."""
    f = ff.get_format(name)
    if f.has_nan and f.kind == "float":
        return x
    return np.nan_to_num(x, nan=1.0, posinf=3.0, neginf=-3.0)


def check(got, want, device="cpu"):
    """got is a float64 tensor on device, equal to the numpy result element for element."""
    assert isinstance(got, torch.Tensor), type(got)
    assert got.device.type == device and got.dtype == torch.float64
    w = np.asarray(want, np.float64)
    assert tuple(got.shape) == w.shape
    n = int(mismatches(got.cpu().numpy(), w).sum())
    assert n == 0, f"{n} mismatches"


@pytest.mark.parametrize("name", FORMATS)
def test_elementwise_ops_equal_numpy(name):
    a = finite_for(name, data(600, 1))
    b = finite_for(name, data(600, 2))
    c = finite_for(name, data(600, 3))
    if not ff.get_format(name).has_nan or name == "int8":
        a, b, c = np.abs(a) + 1, np.abs(b) + 1, np.abs(c)  # no invalid results (0/0, Inf-Inf)
    ta, tb, tc = (torch.from_numpy(v) for v in (a, b, c))
    for mode in DETERMINISTIC:
        for op in BINARY:
            fn = getattr(ff, op)
            check(fn(ta, tb, name, mode), fn(a, b, name, mode))
        for op in UNARY:
            fn = getattr(ff, op)
            check(fn(ta, name, mode), fn(a, name, mode))
        check(ff.fma(ta, tb, tc, name, mode), ff.fma(a, b, c, name, mode))
    # scalars and broadcasting mix with tensors; stochastic from an int seed as numpy
    check(ff.add(ta, 0.5, name), ff.add(a, 0.5, name))
    check(ff.mul(ta[:, None][:20], tb[None, :30], name), ff.mul(a[:, None][:20], b[None, :30], name))
    check(ff.add(ta, tb, name, "stochastic", rng=7), ff.add(a, b, name, "stochastic", rng=7))


@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16, torch.int16])
def test_narrow_tensor_dtypes_are_taken_exactly(src):
    x = torch.from_numpy(data(500, 4, spread=6, specials=False)).to(src)
    y = torch.from_numpy(data(500, 5, spread=6, specials=False)).to(src)
    xv, yv = x.to(torch.float64).numpy(), y.to(torch.float64).numpy()
    check(ff.add(x, y, "fp32"), ff.add(xv, yv, "fp32"))
    check(ff.fma(x, y, x, "bf16", "up"), ff.fma(xv, yv, xv, "bf16", "up"))
    check(ff.sum(x, "fp16", acc_fmt="fp32"), ff.sum(xv, "fp16", acc_fmt="fp32"))


def test_fp64_ops_take_the_exact_paths():
    a, b = data(300, 6, spread=600), data(300, 7, spread=600)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for mode in ("nearest_even", "toward_zero", "up"):
        check(ff.mul(ta, tb, "fp64", mode), ff.mul(a, b, "fp64", mode))
        check(ff.div(ta, tb, "fp64", mode), ff.div(a, b, "fp64", mode))
        check(ff.fma(ta, tb, ta, "fp64", mode), ff.fma(a, b, a, "fp64", mode))


def test_zero_dimensional_tensors_give_zero_dimensional_tensors():
    r = ff.add(torch.tensor(1.0), torch.tensor(2.0 ** -12), "fp16")
    assert isinstance(r, torch.Tensor) and r.shape == () and float(r) == 1.0
    s = ff.sum(torch.full((4000,), 0.0001), "fp16")  # fp16 stops growing at 0.25
    assert s.shape == () and float(s) == ff.sum([0.0001] * 4000, "fp16") == 0.25


@pytest.mark.parametrize("order", ORDERS)
def test_sum_dot_matmul_every_order_equal_numpy(order):
    x = data((7, 40), 8, spread=8, specials=False)
    tx = torch.from_numpy(x)
    for fmt, acc in (("bf16", "fp32"), ("fp16", "fp16"), ("fp8_e4m3", "bf16")):
        check(ff.sum(tx, fmt, acc, order), ff.sum(x, fmt, acc, order))
        check(ff.sum(tx, fmt, acc, order, axis=1), ff.sum(x, fmt, acc, order, axis=1))
        check(ff.sum(tx, fmt, acc, order, axis=0, block=4), ff.sum(x, fmt, acc, order, axis=0, block=4))
    a, b = data((5, 33), 9, 6, False), data((33, 6), 10, 6, False)
    c = data((5, 6), 11, 6, False)
    ta, tb, tc = (torch.from_numpy(v) for v in (a, b, c))
    for mode in ("nearest_even", "toward_zero"):
        kw = dict(acc_fmt="fp32", order=order, rounding=mode)
        check(ff.matmul(ta, tb, "bf16", **kw), ff.matmul(a, b, "bf16", **kw))
        check(ff.matmul(ta, tb, "fp16", out_fmt="fp16", c=tc, alpha=0.5, **kw),
              ff.matmul(a, b, "fp16", out_fmt="fp16", c=c, alpha=0.5, **kw))
        check(ff.dot(ta, ta.flip(0), "fp8_e5m2", **kw), ff.dot(a, a[::-1], "fp8_e5m2", **kw))
        check(ff.matmul(ta[0], tb, "bf16", **kw), ff.matmul(a[0], b, "bf16", **kw))


BLOCK_SCALED = ("st_fdpa", "gst_fdpa")  # block-scaled units: called through block_scaled_matmul


@pytest.mark.parametrize("preset", sorted(p for p, m in ff.tensorcore_models().items()
                                          if m.algorithm not in BLOCK_SCALED))
def test_matmul_every_tensorcore_preset_equal_numpy(preset):
    m = ff.tensorcore_models()[preset]
    fmt = m.fmt
    rng = np.random.default_rng(abs(hash(preset)) % 2 ** 32)
    if fmt == "int8":
        a = rng.integers(-128, 128, (2, 4, 48)).astype(np.float64)
        b = rng.integers(-128, 128, (48, 5)).astype(np.float64)
    else:
        a = data((2, 4, 48), 12, 6, False)
        b = data((48, 5), 13, 6, False)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    check(ff.matmul(ta, tb, fmt, model=preset), ff.matmul(a, b, fmt, model=preset))
    check(ff.dot(ta, ta.flip(-1), fmt, model=preset), ff.dot(a, a[..., ::-1], fmt, model=preset))
    if fmt != "int8":
        check(ff.matmul(ta, tb, fmt, model=preset, out_fmt="bf16", c=ta[..., :5].sum(-1, keepdim=True)),
              ff.matmul(a, b, fmt, model=preset, out_fmt="bf16", c=a[..., :5].sum(-1, keepdims=True)))
    c = np.round(data((4, 5), 14, 4, False)) if fmt == "int8" else data((4, 5), 14, 4, False)
    check(ff.mma(ta, tb, torch.from_numpy(c), fmt, preset), ff.mma(a, b, c, fmt, preset))


def test_h100_bf16_gemm_on_float32_tensors():
    a = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    b = torch.randn(256, 32, generator=torch.Generator().manual_seed(1))
    check(ff.matmul(a, b, "bf16", model="h100"),
          ff.matmul(a.numpy(), b.numpy(), "bf16", model="h100"))


def test_results_are_not_differentiable():
    """Documented: the arithmetic has no gradient (only cast / fake_quant do); the
    result is a plain tensor, not a silently wrong gradient."""
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    for r in (ff.add(a, a, "bf16"), ff.sum(a, "bf16"), ff.matmul(a[None], a[:, None], "bf16")):
        assert not r.requires_grad and r.grad_fn is None
    assert a.grad is None


def test_the_numpy_path_is_unchanged():
    """numpy in still gives numpy (and scalars Python floats): the tensor rule is opt-in."""
    assert isinstance(ff.add(np.ones(3), 1.0, "bf16"), np.ndarray)
    assert isinstance(ff.add(1.0, 1.0, "bf16"), float)
    assert isinstance(ff.sum([1.0, 2.0], "bf16"), float)
    assert isinstance(ff.matmul(np.ones((2, 2)), np.ones((2, 2)), "bf16", model="h100"), np.ndarray)


# ------------------------------------------------------------------------------ bad input
ENTRIES = {
    "add": lambda x, y: ff.add(x, y, "bf16"),
    "fma": lambda x, y: ff.fma(x, y, y, "bf16"),
    "sqrt": lambda x, y: ff.sqrt(x, "bf16"),
    "minimum": lambda x, y: ff.minimum(x, y, "bf16"),
    "sum": lambda x, y: ff.sum(x, "bf16"),
    "dot": lambda x, y: ff.dot(x, y, "bf16"),
    "matmul": lambda x, y: ff.matmul(x[:, None], y[None, :], "bf16", model="h100"),
    "cast": lambda x, y: ff.cast(x, "bf16"),
    "encode": lambda x, y: ff.encode(x, "bf16"),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_bad_tensor_input_says_what_was_given_and_what_is_accepted(entry):
    call = ENTRIES[entry]
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"complex.*accepted: floating-point"):
        call(torch.tensor([1 + 1j, 2.0]), x)
    with pytest.raises(TypeError, match=r"unsupported tensor dtype torch.uint32; accepted"):
        call(x.to(torch.uint32), x)
    with pytest.raises(ValueError, match=r"tensors on meta are not supported; accepted devices"):
        call(x.to("meta"), x.to("meta"))
    if entry not in ("cast", "encode", "sqrt", "sum"):  # the two-operand entries
        with pytest.raises(TypeError, match=r"numpy array mixed with torch tensors"):
            call(x, np.array([1.0, 2.0]))
        with pytest.raises(TypeError, match=r"numpy array mixed with torch tensors"):
            call(np.array([1.0, 2.0]), x)
        with pytest.raises(ValueError, match=r"two devices \(cpu and meta\)|meta are not supported"):
            call(x, x.to("meta"))


def test_fparray_mixed_with_tensors_is_refused():
    with pytest.raises(TypeError, match="FPArray mixed with torch tensors"):
        ff.add(ff.array([1.0, 2.0], "bf16"), torch.tensor([1.0, 2.0]), "bf16")


def test_int_codes_and_float_tensors_where_meaningless():
    with pytest.raises(TypeError, match="integer tensor"):
        ff.decode(torch.tensor([1.0]), "fp16")  # codes are integers, not floats
    with pytest.raises(ValueError, match="2\\*\\*53"):  # the device code cannot hold them
        with force_namespace():
            ff.cast(torch.tensor([2 ** 60 + 1]), "fp32")


def test_functions_without_device_code_refuse_instead_of_copying():
    """Under force_namespace CPU tensors take the path CUDA tensors take: functions with
    no device implementation yet raise NotImplementedError naming themselves and the
    device (no silent host copy)."""
    x = torch.tensor([1.0, 2.0])
    with force_namespace():
        for name, call in ENTRIES.items():
            if name in ("cast", "encode", "matmul", "add", "fma", "minimum", "sqrt", "sum",
                        "dot"):
                assert isinstance(call(x, x), torch.Tensor)
                continue
            with pytest.raises(NotImplementedError, match=rf"floatfmt.{name} has no cpu implementation"):
                call(x, x)


@pytest.mark.parametrize("namespace", [False, True])
def test_decode_takes_the_codes_encode_returns(namespace):
    """encode gives torch's unsigned dtypes (uint16/32/64); decode takes them back on
    both paths (the dtype check must not refuse them as it refuses uint32 values)."""
    x = torch.from_numpy(data(300, 15, spread=20))
    with force_namespace(namespace):
        for name in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "e8m0", "int8"):
            pol = "saturate" if name in ("int8", "fp8_e4m3") else None
            v = x.abs() if name == "e8m0" else x
            if name == "int8":
                v = torch.nan_to_num(v, nan=0.0)
            codes = ff.encode(v, name, overflow=pol)
            check(ff.decode(codes, name), ff.cast(v.numpy(), name, overflow=pol))


# The tensor-core models on the device path (every preset, the epilogue, mma,
# block_scaled_mma): tests/test_torch_tensorcore.py.


def test_device_matmul_refuses_what_it_lacks():
    """(Every preset, the epilogue and mma run on the device now; more refusals in
    tests/test_torch_tensorcore.py.)"""
    a, b = torch.ones(2, 3), torch.ones(3, 2)
    with force_namespace():
        with pytest.raises(ValueError, match="order="):
            ff.matmul(a, b, "bf16", model="h100", order="pairwise")


DEVICE_OP_FORMATS = ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz",
                     "fp6_e3m2", "fp4_e2m1", "int8", "uint8", "e8m0"]


def device_data(name, n, seed):
    """Values over (and past) the format's whole range, both signs, with exact zeros of
    both signs, x and -x pairs (exact zero sums), and Inf / NaN where the format has them."""
    f = ff.get_format(name)
    rng = np.random.default_rng(seed)
    if f.kind == "int":
        x = rng.integers(int(f.min) - 20, int(f.max) + 20, n).astype(np.float64)
        x[::7] += rng.random(x[::7].size)
    else:
        lo, hi = f.emin - f.mbits - 2, f.emax + 2
        x = np.ldexp(rng.uniform(1, 2, n), rng.integers(lo, hi, n))
        x *= np.where(rng.random(n) < 0.5, -1.0, 1.0)
    x[:6] = [0.0, -0.0, 0.0, -0.0, 1.0, -1.0]
    if f.has_nan and f.kind == "float" and f.signed:
        x[6:9] = [np.inf, -np.inf, np.nan]
    if not f.signed:
        x = np.abs(x)
    return x


@pytest.mark.parametrize("name", DEVICE_OP_FORMATS)
def test_device_elementwise_ops_equal_numpy(name):
    """The namespace-written arithmetic (what CUDA runs: ops' rules), forced on CPU
    tensors, equals the numpy kernels bit for bit: every deterministic mode, daz and
    ftz, exact zero sums (signs), sums, quotients and roots whose float64 value is
    inexact (truncated value and remainder), x / 0, 0 / 0, roots of negatives, specials."""
    f = ff.get_format(name)
    a = device_data(name, 3000, 1)
    b = device_data(name, 3000, 2)
    b[:40] = -a[:40]  # exact zero sums
    c = device_data(name, 3000, 3)
    if not f.has_nan or f.kind == "int":  # no NaN to hold invalid results: keep them away
        b = np.where(np.isinf(a) | np.isinf(b), 1.0, b)
    ta, tb, tc = (torch.from_numpy(v) for v in (a, b, c))
    calls = {
        "add": lambda p, q, r, **k: ff.add(p, q, name, **k),
        "sub": lambda p, q, r, **k: ff.sub(p, q, name, **k),
        "mul": lambda p, q, r, **k: ff.mul(p, q, name, **k),
        "fma": lambda p, q, r, **k: ff.fma(p, q, r, name, **k),
        "div": lambda p, q, r, **k: ff.div(p, q, name, **k),
        "sqrt": lambda p, q, r, **k: ff.sqrt(p, name, **k),
        "neg": lambda p, q, r, **k: ff.neg(p, name, **k),
        "abs": lambda p, q, r, **k: ff.abs(p, name, **k),
        "minimum": lambda p, q, r, **k: ff.minimum(p, q, name, **k),
        "maximum": lambda p, q, r, **k: ff.maximum(p, q, name, **k),
    }
    options = [dict(rounding=m) for m in DETERMINISTIC]
    if f.kind == "float" and f.subnormals:
        options += [dict(daz=True), dict(ftz=True, rounding="down")]
    for op, call in calls.items():
        if op in ("neg", "sub", "fma") and not f.signed:
            continue  # negative results: NaN in unsigned formats, which raise on both paths
        for kw in options:
            try:
                want = call(a, b, c, **kw)
            except ValueError as err:  # an invalid result in a format without NaN
                with force_namespace(), pytest.raises(ValueError, match=str(err)[:20]):
                    call(ta, tb, tc, **kw)
                continue
            with force_namespace():
                got = call(ta, tb, tc, **kw)
            check(got, want)
    with force_namespace():  # Python scalars beside tensors, broadcasting
        check(ff.add(ta[:50, None], 1.0, name), ff.add(a[:50, None], 1.0, name))
        check(ff.mul(ta[:50, None], tb[None, :60], name), ff.mul(a[:50, None], b[None, :60], name))


def test_device_ops_refuse_what_they_lack():
    x = torch.tensor([1.0, 2.0])
    with force_namespace():
        with pytest.raises(TypeError, match="numpy array mixed"):
            ff.add(x, np.ones(2), "bf16")


def test_device_quotient_and_root_remainders_equal_eft():
    """For formats up to fp32 a quotient or root is never within half a float64 ulp of
    a grid point or midpoint unless exact (53 >= 2p + 2), so which side of q the exact
    value lies on cannot change their results; the device helpers are checked on full
    float64 operands instead, against floatfmt.arith.eft (t and remainder class)."""
    from floatfmt.arith import eft, residuals
    rng = np.random.default_rng(5)
    x = rng.standard_normal(20000) * np.exp2(rng.integers(-300, 300, 20000))
    y = rng.standard_normal(20000) * np.exp2(rng.integers(-300, 300, 20000))
    x[:4], y[:4] = [0.0, 1.0, -0.0, 6.0], [1.0, 0.0, 0.0, 3.0]
    t, c = residuals.quotient_sticky(torch.from_numpy(x), torch.from_numpy(y))
    tw, cw = eft.exact_quotient(x, y)
    assert not mismatches(t.numpy(), tw).any() and np.array_equal(c.numpy(), cw)
    ax = np.abs(x)
    t, c = residuals.root_sticky(torch.from_numpy(ax))
    tw, cw = eft.exact_sqrt(ax)
    assert not mismatches(t.numpy(), tw).any() and np.array_equal(c.numpy(), cw)
    assert (cw == 1).any() and (cw == 3).any()  # both sides occur


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_device_sum_equals_numpy(order):
    """sum on the device (``accumulate.sum`` on the tensors), forced on CPU tensors: every axis,
    accumulator and output formats, directed modes (zero signs of cancellations), the
    fp16 stagnation of 0.0001 at 0.25."""
    x = data((37, 6), 20, spread=10, specials=False)
    x[:, 0] = np.where(np.arange(37) % 2, 1.5, -1.5)  # exact cancellations
    t = torch.from_numpy(x)
    for fmt, acc, out in (("bf16", "fp32", None), ("fp16", "fp16", "bf16"), ("fp8_e4m3", "bf16", None),
                          ("fp32", "fp32", None), ("int8", "int8", None)):
        for mode in ("nearest_even", "down", "toward_zero", "up"):
            for axis in (None, 0, 1, -1):
                want = ff.sum(x, fmt, acc, order, axis, out_fmt=out, rounding=mode,
                              overflow="saturate" if fmt == "int8" else None)
                with force_namespace():
                    got = ff.sum(t, fmt, acc, order, axis, out_fmt=out, rounding=mode,
                                 overflow="saturate" if fmt == "int8" else None)
                check(got, want)
    with force_namespace():
        assert float(ff.sum(torch.full((2600,), 0.0001), "fp16", order=order)) == \
            ff.sum([0.0001] * 2600, "fp16", order=order)


def test_tensors_on_two_devices_are_refused(monkeypatch):
    """Two accepted devices in one call (cpu and meta, meta admitted for the test, as
    there is no second real device here): ValueError naming both."""
    from floatfmt.backend import dispatch
    monkeypatch.setattr(dispatch, "DEVICES", ("cpu", "cuda", "meta"))
    x = torch.tensor([1.0, 2.0])
    for call in (lambda: ff.add(x, x.to("meta"), "bf16"),
                 lambda: ff.fma(x, x, x.to("meta"), "bf16"),
                 lambda: ff.matmul(x[None], x.to("meta")[:, None], "bf16", model="h100"),
                 lambda: ff.quantize(x, "int8", scale=torch.tensor(0.5, device="meta"))):
        with pytest.raises(ValueError, match=r"tensors on two devices \(cpu and meta\)"):
            call()


@pytest.mark.parametrize("preset", sorted(p for p, m in ff.tensorcore_models().items()
                                          if m.algorithm in BLOCK_SCALED))
def test_block_scaled_matmul_on_tensors_equal_numpy(preset):
    unit, bname = preset.split("/")
    a = data((4, 64), 21, 6, False)
    b = data((64, 3), 22, 6, False)
    want = ff.block_scaled_matmul(a, b, bname, model=unit)
    got = ff.block_scaled_matmul(torch.from_numpy(a), torch.from_numpy(b), bname, model=unit)
    assert torch.is_tensor(got)
    check(got, want)


def test_neighbours_and_ulp_on_tensors_equal_numpy():
    x = data((300,), 23, 40, True)
    for fn in (ff.next_up, ff.next_down, ff.ulp):
        for fmt in ("bf16", "fp8_e4m3", "fp4_e2m1", "int8"):
            got = fn(torch.from_numpy(x), fmt)
            assert torch.is_tensor(got)
            check(got, fn(x, fmt))
