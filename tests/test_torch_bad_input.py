"""Bad input to the tensor entry points: the same clear error on every path.

Each case runs on the CPU path (numpy kernels on the tensor's memory) and under
``force_namespace`` (the device code, as on CUDA) and must raise the documented
exception type from floatfmt's own code (never a traceback from inside torch), with a
message that names what was given and what is accepted.  The 'meta' device stands
in for a second device.
"""

from __future__ import annotations

import traceback
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import floatfmt as ff  # noqa: E402
from floatfmt.backend.dispatch import force_namespace  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")

PATHS = ["cpu", "device"]

# one call per tensor entry point, each taking the operand array ``x``
CALLS = {
    "cast": lambda x: ff.cast(x, "bf16"),
    "encode": lambda x: ff.encode(x, "fp8_e4m3"),
    "add": lambda x: ff.add(x, x, "bf16"),
    "fma": lambda x: ff.fma(x, x, x, "fp16"),
    "sqrt": lambda x: ff.sqrt(x, "bf16"),
    "minimum": lambda x: ff.minimum(x, x, "bf16"),
    "sum": lambda x: ff.sum(x, "bf16", order="pairwise"),
    "dot": lambda x: ff.dot(x, x, "bf16"),
    "matmul": lambda x: ff.matmul(x.reshape(2, 2), x.reshape(2, 2), "bf16"),
    "matmul_h100": lambda x: ff.matmul(x.reshape(2, 2), x.reshape(2, 2), "bf16", model="h100"),
    "quantize": lambda x: ff.quantize(x, "int8"),
    "fake_quant": lambda x: ff.fake_quant(x, "fp8_e4m3"),
    "fake_quant_mx": lambda x: ff.fake_quant(x, "mxfp8_e4m3"),
}


def _raise(fn, path):
    with force_namespace(path == "device"), pytest.raises((TypeError, ValueError)) as e:
        fn()
    frame = traceback.extract_tb(e.value.__traceback__)[-1]
    assert "/floatfmt/" in frame.filename.replace("\\", "/"), \
        f"raised outside floatfmt, at {frame.filename}:{frame.lineno}: {e.value!r}"
    return e.value


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(CALLS))
def test_complex_tensor(name, path):
    x = torch.ones(4, dtype=torch.complex64)
    e = _raise(lambda: CALLS[name](x), path)
    assert isinstance(e, TypeError)
    assert "complex" in str(e) and "accepted" in str(e)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(CALLS))
def test_unsupported_dtype(name, path):
    """uint16 holds codes (``encode``'s output), not values: refused as an operand."""
    x = torch.ones(4, dtype=torch.uint16)
    e = _raise(lambda: CALLS[name](x), path)
    assert isinstance(e, TypeError)
    assert "uint16" in str(e) and "accepted" in str(e)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(CALLS))
def test_meta_device(name, path):
    x = torch.ones(4, device="meta")
    e = _raise(lambda: CALLS[name](x), path)
    assert isinstance(e, ValueError)
    assert "meta" in str(e) and "cpu" in str(e)


TWO_DEVICES = {
    "add": lambda a, b: ff.add(a, b, "bf16"),
    "fma": lambda a, b: ff.fma(a, a, b, "bf16"),
    "dot": lambda a, b: ff.dot(a, b, "bf16"),
    "matmul_c": lambda a, b: ff.matmul(a.reshape(2, 2), a.reshape(2, 2), "bf16",
                                       c=b.reshape(2, 2)),
    "matmul_h100_c": lambda a, b: ff.matmul(a.reshape(2, 2), a.reshape(2, 2), "bf16",
                                            model="h100", c=b.reshape(2, 2)),
    "quantize_scale": lambda a, b: ff.quantize(a, "int8", scale=b[0]),
    "fake_quant_scale": lambda a, b: ff.fake_quant(a, "int8", scale=b[0]),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(TWO_DEVICES))
@pytest.mark.parametrize("order", ["cpu_first", "meta_first"])
def test_two_devices(name, order, path):
    a, b = torch.ones(4), torch.ones(4, device="meta")
    if order == "meta_first" and not name.endswith(("_c", "_scale")):
        a, b = b, a
    e = _raise(lambda: TWO_DEVICES[name](a, b), path)
    assert isinstance(e, ValueError)
    assert "meta" in str(e) and "cpu" in str(e)


MIXED = {
    "add_numpy": lambda t: ff.add(t, np.ones(4), "bf16"),
    "add_numpy_0d": lambda t: ff.add(t, np.array(2.0), "bf16"),
    "add_numpy_float32": lambda t: ff.add(t, np.float32(2.0), "bf16"),
    "add_list": lambda t: ff.add(t, [1.0, 2.0, 3.0, 4.0], "bf16"),
    "add_fraction": lambda t: ff.add(t, Fraction(1, 3), "bf16"),
    "add_numeric_string": lambda t: ff.add(t, "0.1", "bf16"),
    "fma_numpy_c": lambda t: ff.fma(t, t, np.ones(4), "bf16"),
    "dot_list": lambda t: ff.dot(t, [1.0] * 4, "bf16"),
    "matmul_numpy_c": lambda t: ff.matmul(t.reshape(2, 2), t.reshape(2, 2), "bf16",
                                          c=np.ones((2, 2))),
    "mma_numpy_c": lambda t: ff.mma(t.reshape(2, 2), t.reshape(2, 2), np.ones((2, 2)), "fp16",
                                    "h100"),
    "quantize_numpy_scale": lambda t: ff.quantize(t.reshape(2, 2), "int8", granularity="channel",
                                                  scale=np.ones(2)),
    "fake_quant_numpy_scale": lambda t: ff.fake_quant(t.reshape(2, 2), "int8",
                                                      granularity="channel", scale=np.ones(2)),
    "fake_quant_numpy_x_tensor_scale": lambda t: ff.fake_quant(np.ones((2, 2)), "int8",
                                                               granularity="channel",
                                                               scale=t[:2]),
    "fparray": lambda t: ff.add(ff.array([1.0] * 4, "bf16"), t, "bf16"),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(MIXED))
def test_mixed_operands(name, path):
    """numpy arrays, numpy scalars, lists, Fractions or numeric strings beside tensors:
    TypeError naming the intruder on both paths (the device code takes tensors and
    Python numbers only; the CPU path must not silently take more)."""
    e = _raise(lambda: MIXED[name](torch.ones(4)), path)
    assert isinstance(e, TypeError)
    assert "mixed with torch tensors" in str(e)


@pytest.mark.parametrize("path", PATHS)
def test_big_int_beside_tensors(path):
    e = _raise(lambda: ff.add(torch.ones(2), 2 ** 60 + 1, "bf16"), path)
    assert isinstance(e, ValueError) and "2**53" in str(e)


@pytest.mark.parametrize("path", PATHS)
def test_int64_tensor_past_2_53(path):
    """float64 cannot hold it, and the device does not round on the way in."""
    e = _raise(lambda: ff.cast(torch.tensor([2 ** 60 + 1]), "fp32"), path)
    assert isinstance(e, ValueError) and "2**53" in str(e)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", ["float32", "bool", "complex64", "float8_e8m0fnu"])
def test_decode_takes_integer_codes(dtype, path):
    codes = torch.ones(3).to(getattr(torch, dtype))
    e = _raise(lambda: ff.decode(codes, "fp8_e4m3"), path)
    assert isinstance(e, TypeError)
    assert dtype in str(e)


@pytest.mark.parametrize("path", PATHS)
def test_rng_of_the_wrong_kind(path):
    e = _raise(lambda: ff.cast(torch.ones(3), "bf16", "stochastic",
                               rng=np.random.default_rng(0)), path)
    assert isinstance(e, TypeError) and "torch.Generator" in str(e)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", ["add", "sum", "dot", "matmul_h100", "encode", "quantize"])
def test_requires_grad_where_not_differentiable(name, path):
    """Documented (``floatfmt.backend.dispatch``): functions other than cast / fake_quant /
    quantize().dequantize() give results without a graph; no error, no gradient."""
    x = torch.ones(4, requires_grad=True)
    with force_namespace(path == "device"):
        r = CALLS[name](x)
    if name == "quantize":
        r = r.codes
    assert not r.requires_grad and r.grad_fn is None


@pytest.mark.parametrize("path", PATHS)
def test_bool_tensor_is_taken_as_numbers(path):
    """bool tensors are documented as accepted (0 and 1), as numpy bool arrays are."""
    b = torch.tensor([True, False, True])
    with force_namespace(path == "device"):
        r = ff.add(b, b, "fp8_e4m3")
    assert r.tolist() == ff.add(b.numpy(), b.numpy(), "fp8_e4m3").tolist() == [2.0, 0.0, 2.0]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_classify_refuses_tensors(device, path):
    """classify's class names cannot be a tensor: TypeError naming the way out, before
    any copy (a meta tensor never reaches torch's 'no data' error)."""
    e = _raise(lambda: ff.classify(torch.ones(2, device=device), "bf16"), path)
    assert isinstance(e, TypeError) and "tensor" in str(e)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", ["pack", "unpack"])
def test_pack_meta(name, path):
    data = torch.ones(2, dtype=torch.uint8, device="meta")
    call = (lambda: ff.pack(data, "fp4_e2m1")) if name == "pack" else \
        (lambda: ff.unpack(data, "fp4_e2m1", (4,)))
    e = _raise(call, path)
    assert isinstance(e, ValueError) and "meta" in str(e) and "cpu" in str(e)


@pytest.mark.parametrize("path", PATHS)
def test_scale_lists_stay_accepted(path):
    """The one list operand beside tensors (``dispatch.LIST_OPERANDS``): quantize's
    per-channel scale / zero_point, taken alike by the numpy path and every device."""
    x = np.array([[1.0, -2.0, 3.0], [40.0, 50.0, -60.0]])
    want = ff.quantize(x, "int8", granularity="channel", scale=[0.1, 0.5], zero_point=[1, -2])
    with force_namespace(path == "device"):
        got = ff.quantize(torch.from_numpy(x), "int8", granularity="channel", scale=[0.1, 0.5],
                          zero_point=[1, -2])
        assert got.dequantize().tolist() == want.dequantize().tolist()
    assert got.codes.tolist() == want.codes.tolist()
