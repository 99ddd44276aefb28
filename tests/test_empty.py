"""Empty inputs, every public function (issue 9, class 4).

Every public function that takes array data must accept arrays with no elements, of
every dtype and of every shape with a zero-length axis, and answer what numpy answers
for the same call: an empty result of numpy's shape, or the identity of a reduction
(a sum of no terms is +0; a (3, 0) @ (0, 4) product is zeros((3, 4)), all +0).

The dtype a function returns is its own rule (``cast`` keeps the input dtype, ``add``
gives float64, ``encode`` gives the code dtype ...): the reference for it is the same call
on a one-element array of the same dtype, so an empty input may not change the dtype.

``CASES`` lists one driver per public name; ``test_table_covers_public_api`` fails when
a public name (``floatfmt.__all__`` and the ``__all__`` of the public modules) has neither
a driver nor a reason in ``NO_ARRAY_INPUT``, so a new function cannot skip this test.
"""

from __future__ import annotations

import importlib

import ml_dtypes
import numpy as np
import pytest

import floatfmt as ff
from floatfmt.arith.accumulate import ORDERS
from floatfmt.core.cast import round_exact, rounding_decision
from floatfmt.core.codec import codes_to_values, values_to_codes
from floatfmt.core.intake import to_exact
from floatfmt.core.formats import get_format
from floatfmt.scaling.mx_nvfp4 import MX_FORMATS
from floatfmt.core.packing import pack, packed_nbytes, unpack
from floatfmt.training.recipes import recipe_matmul
from floatfmt.arith.matrixunit.tensorcore import fused_dot, get_model, tensorcore_models, tensorcore_product

SHAPES = [(0,), (0, 3), (3, 0), (2, 0, 4), (0, 0)]
DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int8, np.uint8, np.bool_,
          ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]
FMTS = ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "int8",
        "uint8", "e8m0"]

PUBLIC_MODULES = ["core.cast", "core.codec", "arith.ops", "arith.fparray", "arith.accumulate", "arith.matrixunit.tensorcore", "scaling.quantized_tensor",
                  "scaling.quantize", "scaling.mx_nvfp4", "scaling.scales", "scaling.int_gemm", "training.delayed_scaling",
                  "training.loss_scaling", "teach.quantization_demo", "training.mx_gemms", "core.info", "core.formats",
                  "core.packing", "training.recipes"]


def _one(shape):
    """The shape with every zero-length axis made length 1 (the non-empty twin)."""
    return tuple(1 if n == 0 else n for n in shape)


def _arr(shape, dtype, fill=1):
    return np.full(shape, fill).astype(dtype)


def _same_type(r, ref):
    """The empty call's result has the type (and dtype) the non-empty call gives."""
    assert type(r) is type(ref), (type(r), type(ref))
    if isinstance(ref, np.ndarray):
        assert r.dtype == ref.dtype, (r.dtype, ref.dtype)


def _zeros(r):
    """Every element is +0 (the identity of a sum: IEEE gives +0 for an empty sum)."""
    v = np.asarray(r, np.float64)
    assert (v == 0).all() and not np.signbit(v).any(), v


def _check_elementwise(fn, shape, dtype, expect_shape=None):
    """fn on an empty array: the shape numpy gives and the type fn gives on a non-empty
    twin; where the non-empty twin is refused, the empty one is refused the same way."""
    try:
        ref = fn(_arr(_one(shape), dtype))
    except (TypeError, ValueError) as e:
        with pytest.raises(type(e)):
            fn(_arr(shape, dtype))
        return None
    r = fn(_arr(shape, dtype))
    _same_type(r, ref)
    assert np.shape(r) == (shape if expect_shape is None else expect_shape)
    return r


# ------------------------------------------------------------------------------ drivers
# Each driver takes (shape, dtype) and asserts; a name maps to a list of them.

def _elementwise(call):
    def drive(shape, dtype):
        _check_elementwise(call, shape, dtype)
    return drive


def _codes_driver(shape, dtype):
    for fmt in FMTS:
        f = get_format(fmt)
        codes = np.zeros(shape, ff.core.codec.code_dtype(f))
        r = ff.decode(codes, fmt)
        assert r.shape == shape and r.dtype == ff.decode(np.zeros(_one(shape), codes.dtype),
                                                         fmt).dtype
        assert codes_to_values(codes, f).shape == shape
        assert values_to_codes(np.zeros(shape), f).shape == shape
        # codes handed over in another integer dtype
        if np.dtype(dtype).kind in "iu":
            _check_elementwise(lambda x: ff.decode(x, fmt), shape, dtype)


def _sum_driver(shape, dtype):
    x = _arr(shape, dtype)
    for order in ORDERS:
        for axis in [None] + list(range(len(shape))) + [-1]:
            for fmt, acc in [("fp16", None), ("bf16", "fp32"), ("fp8_e4m3", "fp16"),
                             ("fp64", "fp64"), ("int8", "fp32")]:
                want = np.sum(x.astype(np.float64), axis=axis)
                try:
                    ref = ff.sum(_arr(_one(shape), dtype), fmt, acc, order, axis)
                except (TypeError, ValueError) as e:
                    with pytest.raises(type(e)):
                        ff.sum(x, fmt, acc, order, axis)
                    continue
                r = ff.sum(x, fmt, acc, order, axis)
                assert type(r) is type(ref) and np.shape(r) == np.shape(want), (order, axis)
                _zeros(r)
    for rounding in ("down", "stochastic"):  # the sign of an empty sum in every mode
        _zeros(ff.sum(x, "fp16", rounding=rounding, rng=1))
        _zeros(ff.sum(x, "fp16", order="exact", rounding=rounding, rng=1))


_PAIRS = [((0,), (0,)), ((3, 0), (0, 4)), ((0, 3), (3, 4)), ((3, 4), (4, 0)), ((0, 0), (0, 0)),
          ((2, 3, 0), (2, 0, 4)), ((0, 3, 2), (2, 4)), ((3, 0), (0,)), ((0,), (0, 4)),
          ((2, 0), (3, 0, 5)), ((4, 1, 3, 0), (2, 0, 5))]
_DOT_PAIRS = [((0,), (0,)), ((3, 0), (3, 0)), ((0, 3), (0, 3)), ((2, 0, 4), (4,)),
              ((0, 5), (5,))]
_MODELS = [tuple(k.split("/")) for k, m in tensorcore_models().items() if m.block_fmt is None]


def _product_case(kind, sa, sb, dtype, fmt, **kw):
    fn = getattr(ff, kind)
    npfn = np.matmul if kind == "matmul" else (lambda a, b: np.sum(a * b, axis=-1))
    a, b = _arr(sa, dtype), _arr(sb, dtype)
    want = npfn(a.astype(np.float64), b.astype(np.float64))
    try:
        ref = fn(_arr(_one(sa), dtype), _arr(_one(sb), dtype), fmt, **kw)
    except (TypeError, ValueError) as e:
        with pytest.raises(type(e)):
            fn(a, b, fmt, **kw)
        return
    r = fn(a, b, fmt, **kw)
    assert type(r) is type(ref) and np.shape(r) == np.shape(want), (kind, sa, sb, kw)
    _zeros(r)
    if np.ndim(want) > 0 and want.size:  # epilogue: beta * c with no products is beta * c
        c = np.full(np.shape(want), 0.5)
        r = fn(a, b, fmt, **kw, beta=2.0, c=c)
        assert np.shape(r) == np.shape(want) and (np.asarray(r) == 1.0).all()


def _product_driver(kind):
    pairs = _PAIRS if kind == "matmul" else _DOT_PAIRS

    def drive(shape, dtype):
        if shape != (0,):  # the shapes come from the pair tables; run them once per dtype
            return
        for sa, sb in pairs:
            for order in ORDERS:
                _product_case(kind, sa, sb, dtype, "bf16", order=order)
            _product_case(kind, sa, sb, dtype, "fp64", acc_fmt="fp64", order="exact")
            _product_case(kind, sa, sb, dtype, "fp16", acc_fmt="fp16", out_fmt="fp8_e4m3")
            for order in ("sequential", "exact"):  # no products: +0 in every mode
                _product_case(kind, sa, sb, dtype, "fp16", order=order, rounding="down")
            if dtype in (np.float64, ml_dtypes.bfloat16, np.int8):  # models: a few dtypes
                for model, fmt in _MODELS:
                    _product_case(kind, sa, sb, dtype, fmt, model=model)
    return drive


def _tensorcore_driver(shape, dtype):
    if shape != (0,):
        return
    for model, fmt in _MODELS:
        for sa, sb in [((3, 0), (0, 4)), ((0, 3), (3, 4)), ((2, 3, 0), (2, 0, 4))]:
            r, acc = tensorcore_product("matmul", _arr(sa, dtype), _arr(sb, dtype), fmt, model)
            assert r.shape == np.matmul(np.ones(sa), np.ones(sb)).shape
            _zeros(r)
        m = get_model(model, fmt)
        P = np.zeros((3, 0))
        r = fused_dot(P, np.zeros((3, 0), np.int64), m)
        assert r.shape == (3,)
        _zeros(r)
        r = fused_dot(P, np.zeros((3, 0), np.int64), m, c=np.full(3, 2.0))
        assert (r == 2.0).all()


_QUANT_FORMATS = ["int8", "uint8", "int4", "uint4", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3",
                  "fp4_e2m1", "bf16", "fp16", "nvfp4", *MX_FORMATS]


def _quant_options(fmt):
    opts = [{}, {"calibration": "percentile"}, {"calibration": "mse"}, {"pow2_scale": True}]
    if fmt in ("int8", "uint8", "int4", "uint4"):
        opts += [{"scheme": "asymmetric"}, {"scheme": "asymmetric", "calibration": "percentile"},
                 {"granularity": "channel"}, {"granularity": "channel", "axis": -1},
                 {"scheme": "asymmetric", "granularity": "channel"}, {"scale": 0.5},
                 {"rounding": "stochastic", "rng": 1}]
    elif fmt in MX_FORMATS or fmt == "nvfp4":
        opts = [{}, {"axis": 0}, {"scale_rounding": "ceil"}] if fmt != "nvfp4" else [{}, {"axis": 0}]
    else:
        opts += [{"granularity": "channel"}, {"scale": 2.0}]
    if fmt in ("int8", "uint4", "fp8_e4m3", "fp8_e5m2"):  # group-wise and 2-D block scaling
        opts += [{"granularity": "group", "group_size": 1}, {"granularity": "block", "block": (1, 1)}]
    return opts


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 3), (2, 0, 4), (0, 0)], ids=str)
def test_empty_axis_takes_any_group_or_block(shape):
    """A zero-length axis has no groups or blocks, so no size can misfit it (on a non-empty
    axis a group or block larger than the axis stays an error)."""
    x = np.zeros(shape)
    for fmt in ("int8", "fp8_e4m3"):
        if shape[-1] == 0:
            q = ff.quantize(x, fmt, granularity="group", group_size=128)
            assert q.dequantize().shape == shape
        if len(shape) >= 2 and 0 in shape[-2:]:
            q = ff.quantize(x, fmt, granularity="block", block=(128, 128) if 0 == shape[-2] == shape[-1]
                            else tuple(128 if d == 0 else d for d in shape[-2:]))
            assert q.dequantize().shape == shape
        with pytest.raises(ValueError, match="group_size"):
            ff.quantize(np.zeros(_one(shape)), fmt, granularity="group", group_size=128)


def _quant_driver(shape, dtype):
    for fmt in _QUANT_FORMATS:
        for opt in _quant_options(fmt):
            def q(x, fmt=fmt, opt=opt):
                return ff.quantize(x, fmt, **opt)
            try:
                ref = q(_arr(_one(shape), dtype, 0))
            except (TypeError, ValueError) as e:
                with pytest.raises(type(e)):
                    q(_arr(shape, dtype))
                continue
            x = _arr(shape, dtype)
            r = q(x)
            assert r.codes.shape == shape and r.codes.dtype == ref.codes.dtype, (fmt, opt)
            d = r.dequantize()
            assert d.shape == shape and d.dtype == ref.dequantize().dtype
            assert ff.dequantize(r).shape == shape
            f = ff.fake_quant(x, fmt, **opt)
            assert f.shape == shape and f.dtype == ff.fake_quant(_arr(_one(shape), dtype, 0), fmt,
                                                                   **opt).dtype
            if not r.granularity == "block" and np.ndim(ref.scale) == 0:
                # no elements: the range found is that of all zeros (amax of nothing is 0)
                assert r.scale == ref.scale and np.all(r.zero_point == ref.zero_point), (fmt, opt)
            e = ff.quantization_error(x, r)
            assert e["mse"] == 0 and e["frac_clipped"] == 0 and e["frac_flushed"] == 0, e


def _int_matmul_driver(shape, dtype):
    if shape != (0,):
        return
    for sa, sb in [((3, 0), (0, 4)), ((0, 3), (3, 4)), ((3, 4), (4, 0))]:
        qa = ff.quantize(_arr(sa, dtype), "int8")
        qb = ff.quantize(_arr(sb, dtype), "int8")
        r = ff.int_matmul(qa, qb)
        want = np.matmul(np.ones(sa), np.ones(sb)).shape
        assert r.acc.shape == want and r.exact.shape == want and r.overflowed.shape == want
        assert not r.acc.any() and not r.overflowed.any() and not r.may_overflow.any()
        r = ff.int_matmul(qa, qb, out_scale=0.5)
        assert r.out.codes.shape == want and not r.out.codes.any()


def _compare_quantization_driver(shape, dtype):
    if shape not in ((0,), (3, 0)):
        return
    rows = ff.compare_quantization(_arr(shape, dtype), show=False)
    assert rows and all(r["mse"] == 0 for r in rows)


def _delayed_scaling_driver(shape, dtype):
    ds = ff.DelayedScaling(history_len=3)
    ds.quantize("w", [3.0, -100.0])
    s = ds.update()["w"]
    q = ds.quantize("w", _arr(shape, dtype))
    assert q.dequantize().shape == shape
    # an empty tensor has amax 0, and an amax of 0 keeps the scale (TE keeps it for amax 0)
    assert ds.update()["w"] == s


def _loss_scaler_driver(shape, dtype):
    ls = ff.LossScaler(init_scale=8.0)
    g, bad = ls.unscale([_arr(shape, dtype)])
    assert not bad and g[0].shape == shape
    assert np.shape(ls.scale(_arr(shape, dtype))) == shape


def _fparray_driver(shape, dtype):
    x = _check_elementwise(lambda v: ff.array(v, "fp16").values, shape, dtype)
    if x is None:
        return
    for fmt in ("fp16", "bf16", "fp8_e4m3", "fp4_e2m1", "int8", "fp32", "fp64"):
        a = ff.FPArray(_arr(shape, dtype), fmt)
        assert a.shape == shape and a.size == 0
        for r in (a + a, a - a, a * a, a / 2, -a, abs(a), a ** 2, a ** 0.5, 1.0 + a, a * 3):
            assert isinstance(r, ff.FPArray) and r.shape == shape and r.fmt == a.fmt
        assert a.codes.shape == shape and a.values.shape == shape and (a == a).shape == shape
        s = a.sum()
        assert s.shape == () and float(s) == 0 and not np.signbit(float(s))
        if a.ndim == 2:
            m = a @ a.T
            assert m.shape == (shape[0], shape[0])
            _zeros(m.values)
            assert a.sum(axis=0).shape == (shape[1],)
    with pytest.raises(TypeError):
        ff.scalar(_arr(shape, dtype), "fp16")


def _explain_driver(shape, dtype):
    if len(shape) != 1:
        return
    e = ff.explain(_arr(shape, dtype), "fp16")
    assert "0 values" in str(e)


def _cast_driver(shape, dtype):
    for fmt in FMTS:
        for mode in ("nearest_even", "stochastic", "up"):
            _check_elementwise(lambda x: ff.cast(x, fmt, mode, rng=1 if mode == "stochastic" else None),
                               shape, dtype)
        _check_elementwise(lambda x: ff.cast(x, fmt, ftz=True, daz=True), shape, dtype)
        _check_elementwise(lambda x: ff.cast(x, fmt, dtype=np.float32), shape, dtype)


def _binary(name):
    def drive(shape, dtype):
        fn = getattr(ff, name)
        for fmt in FMTS:
            for mode in ("nearest_even", "down", "stochastic"):
                kw = {} if name in ("minimum", "maximum") else {"rounding": mode, "rng": 1}
                _check_elementwise(lambda x: fn(x, x, fmt, **kw), shape, dtype)
                _check_elementwise(lambda x: fn(x, 2.0, fmt, **kw), shape, dtype)
                _check_elementwise(lambda x: fn(ff.array(x, fmt), x, fmt, **kw), shape, dtype)
            # broadcasting an empty axis against a length-1 axis: numpy's shape
            want = np.broadcast_shapes(shape, _one(shape)[-1:])
            _check_elementwise(lambda x: fn(x, np.ones(_one(shape)[-1:]), fmt), shape, dtype,
                               want)
    return drive


def _unary(name):
    def drive(shape, dtype):
        fn = getattr(ff, name)
        for fmt in FMTS:
            _check_elementwise(lambda x: fn(x, fmt), shape, dtype)
            _check_elementwise(lambda x: fn(x, fmt, "up", ftz=True, daz=True), shape, dtype)
    return drive


def _fma_driver(shape, dtype):
    for fmt in FMTS:
        for mode in ("nearest_even", "down", "stochastic"):
            _check_elementwise(lambda x: ff.fma(x, x, x, fmt, mode, rng=1), shape, dtype)
            _check_elementwise(lambda x: ff.fma(x, 2.0, x, fmt, mode, rng=1), shape, dtype)


def _codec_unary(name):
    def drive(shape, dtype):
        fn = getattr(ff, name)
        for fmt in FMTS:
            _check_elementwise(lambda x: fn(x, fmt), shape, dtype)
    return drive


def _mma_driver(shape, dtype):
    """D = A.B + C with no products is C (in the accumulator format), numpy's shape."""
    if shape != (0,):
        return
    for model, fmt in _MODELS:
        for sa, sb in [((3, 0), (0, 4)), ((0, 3), (3, 4)), ((3, 4), (4, 0)),
                       ((2, 3, 0), (2, 0, 4))]:
            want = np.matmul(np.ones(sa), np.ones(sb))
            c = np.full(want.shape, 3.0)
            r = ff.mma(_arr(sa, dtype), _arr(sb, dtype), c, fmt, model)
            assert r.shape == want.shape and (r == 3.0).all(), (model, fmt, sa, sb)
            r = ff.mma(_arr(sa, dtype), _arr(sb, dtype), 0.0, fmt, model)
            assert r.shape == want.shape
            _zeros(r)


def _block_scaled_mma_driver(shape, dtype):
    """Block-scaled D = A.B + C with no products (K = 0) is C; M or N = 0 gives an empty D."""
    from floatfmt.arith.matrixunit.tensorcore import block_scaled_mma
    if shape != (0,):
        return
    for name, m in tensorcore_models().items():
        if m.block_fmt is None:
            continue
        for M, K, N in ((3, 0, 4), (0, 32, 4), (3, 32, 0)):
            nb = -(-K // m.scale_block)
            r = block_scaled_mma(_arr((M, K), dtype), np.ones((M, nb)), _arr((K, N), dtype),
                                 np.ones((nb, N)), np.full((M, N), 3.0), m)
            assert r.shape == (M, N) and (r == 3.0).all(), (name, M, K, N)
    for fmt in ("mxfp8_e4m3", "nvfp4"):
        for M, K, N in ((0, 32, 4), (3, 32, 0)):
            r = ff.block_scaled_matmul(_arr((M, K), dtype), _arr((K, N), dtype), fmt)
            assert r.shape == (M, N), (fmt, M, K, N)


def _flags_driver(shape, dtype):
    x = np.zeros(shape, dtype)
    with ff.flags(masks=True) as fl:
        y = ff.cast(x, "fp8_e4m3")
        ff.add(x, x, "fp16")
        ff.div(x, x, "bf16")
    assert y.shape == shape and isinstance(fl, ff.FlagCounts)
    assert all(v == 0 for v in fl.counts().values())
    assert all(m.shape == shape for ms in fl.masks for m in ms.values())


def _packing_driver(shape, dtype):
    for fmt in ("fp4_e2m1", "fp6_e3m2", "fp8_e4m3", "int4", "uint8"):
        f = get_format(fmt)
        codes = np.zeros(shape, ff.core.codec.code_dtype(f))
        for bitorder in ("little", "big"):
            data = pack(codes, fmt, bitorder=bitorder)
            ref = pack(np.zeros(_one(shape), codes.dtype), fmt, bitorder=bitorder)
            assert data.shape == (0,) and data.dtype == ref.dtype
            back = unpack(data, fmt, shape, bitorder=bitorder)
            assert back.shape == shape and back.dtype == unpack(ref, fmt, _one(shape),
                                                               bitorder=bitorder).dtype
        assert packed_nbytes(0, fmt) == 0
    for fmt in ("mxfp4_e2m1", "mxfp6_e3m2", "mxfp8_e4m3", "nvfp4"):
        q = ff.quantize(_arr(shape, dtype), fmt)
        p = q.to_packed()
        assert p.elements.size == 0 and p.scales.size == q.scale_codes.size
        back = type(q).from_packed(p)
        assert back.dequantize().shape == shape


def _recipe_driver(shape, dtype):
    if shape != (0,):
        return
    for sx, sw in [((3, 0), (0, 4)), ((0, 256), (256, 4)), ((3, 128), (128, 0)), ((0, 0), (0, 0))]:
        r = recipe_matmul(_arr(sx, dtype), _arr(sw, dtype))
        ref = recipe_matmul(_arr(_one(sx), dtype), _arr(_one(sw), dtype))
        assert r.shape == np.matmul(np.ones(sx), np.ones(sw)).shape and r.dtype == ref.dtype
        _zeros(r)


def _mx_gemm_driver(shape, dtype):
    """Training GEMMs with an empty side: empty outputs, or zeros from an empty sum."""
    if shape != (0,):
        return
    from floatfmt.training.mx_gemms import mx_gemm, mx_gemm_operands
    for gemm, sa, sb, out in [("forward", (0, 32), (3, 32), (0, 3)), ("forward", (2, 0), (3, 0), (2, 3)),
                              ("grad_input", (2, 0), (0, 5), (2, 5)),
                              ("grad_weight", (0, 3), (0, 5), (3, 5))]:
        r = mx_gemm(gemm, _arr(sa, dtype), _arr(sb, dtype))
        assert r.shape == out
        _zeros(r)
        qa, qb = mx_gemm_operands(gemm, _arr(sa, dtype), _arr(sb, dtype))
        assert qa.shape == sa and qb.shape == sb


def _mx_exponent_driver(shape, dtype):
    from floatfmt.scaling.mx_nvfp4 import mx_shared_exponent
    _check_elementwise(lambda x: mx_shared_exponent(x), shape, dtype)


CASES = {
    "cast": _cast_driver,
    "round_exact": _elementwise(lambda x: round_exact(to_exact(x), get_format("bf16"), "up")),
    # one number only: an array, empty or not, is the same TypeError
    "rounding_decision": _elementwise(lambda x: rounding_decision(x, "fp16")),
    "encode": _codec_unary("encode"),
    "decode": _codes_driver, "codes_to_values": _codes_driver, "values_to_codes": _codes_driver,
    "classify": _codec_unary("classify"),
    "next_up": _codec_unary("next_up"), "next_down": _codec_unary("next_down"),
    "ulp": _codec_unary("ulp"),
    "explain": _explain_driver,
    **{n: _binary(n) for n in ("add", "sub", "mul", "div", "minimum", "maximum")},
    "fma": _fma_driver,
    **{n: _unary(n) for n in ("sqrt", "neg", "abs")},
    "FPArray": _fparray_driver, "array": _fparray_driver, "scalar": _fparray_driver,
    "sum": _sum_driver,
    "dot": _product_driver("dot"), "matmul": _product_driver("matmul"),
    "tensorcore_product": _tensorcore_driver, "fused_dot": _tensorcore_driver,
    "get_model": _tensorcore_driver, "TensorCoreModel": _tensorcore_driver,
    "quantize": _quant_driver, "dequantize": _quant_driver, "fake_quant": _quant_driver,
    "QuantizedTensor": _quant_driver, "quantization_error": _quant_driver,
    "int_matmul": _int_matmul_driver, "IntMatmulResult": _int_matmul_driver,
    "compare_quantization": _compare_quantization_driver,
    "DelayedScaling": _delayed_scaling_driver, "LossScaler": _loss_scaler_driver,
    "mx_shared_exponent": _mx_exponent_driver,
    "mx_gemm": _mx_gemm_driver, "mx_gemm_operands": _mx_gemm_driver,
    "mma": _mma_driver, "block_scaled_mma": _block_scaled_mma_driver,
    "block_scaled_matmul": _block_scaled_mma_driver,
    "pack": _packing_driver, "unpack": _packing_driver, "packed_nbytes": _packing_driver,
    "PackedTensor": _packing_driver,
    "recipe_matmul": _recipe_driver, "BlockFP8Recipe": _recipe_driver,
    "flags": _flags_driver, "FlagCounts": _flags_driver,
}

# Public names that take no array data, so "empty input" does not apply to them.
NO_ARRAY_INPUT = {
    "compare": "takes format names", "values": "takes a format name",
    "Format": "a format description", "FormatInfo": "a record", "formats": "no arguments",
    "get_format": "takes a format name", "register": "takes a Format", "info": "takes a format",
    "p3109": "takes format parameters", "p3109_formats": "takes a bitwidth",
    "MODES": "a constant", "OVERFLOWS": "a constant", "ORDERS": "a constant",
    "TF32_OPERANDS": "a constant", "MX_FORMATS": "a constant", "SCALE_ROUNDINGS": "a constant",
    "CALIBRATIONS": "a constant", "tensorcore_models": "no arguments",
    "code_dtype": "takes a Format",
    "tensor_exact": "takes a torch tensor (empty tensors: tests/test_torch.py)", "promote_formats": "takes format names",
    "master_weights_demo": "takes scalars (a fixed demonstration)",
    "C_ENTRIES": "a constant", "BITORDERS": "a constant", "RECIPES": "a constant",
    "PROMOTIONS": "a constant", "get_recipe": "takes a recipe name",
    "get_block_model": "takes a model name", "mixed_block_format": "takes format names",
    "matmul_shapes": "takes shapes", "mma_shapes": "takes shapes",
    "check_int_operands": "takes a model and two flags",
    "get_num_threads": "no arguments", "set_num_threads": "takes a thread count",
    "limit_threads": "takes a thread count",
    "get_matmul_kernel": "no arguments", "set_matmul_kernel": "takes a kernel name",
    "matmul_kernel": "takes a kernel name (empty products: the K = 0 case of "
                     "tests/test_tensorcore_fused.py)",
    "BlockFormat": "a block-format description", "BlockFormatInfo": "a record",
    "block_formats": "no arguments", "GEMMS": "a constant", "format_table": "takes rows of compare_quantization", "get_block_format": "takes a block-format name",
}


def _public_names():
    names = set(ff.__all__)
    for m in PUBLIC_MODULES:
        names |= set(importlib.import_module(f"floatfmt.{m}").__all__)
    return names


def test_table_covers_public_api():
    missing = sorted(n for n in _public_names() if n not in CASES and n not in NO_ARRAY_INPUT)
    assert not missing, f"public names without an empty-input driver: {missing}"
    stale = sorted(n for n in (*CASES, *NO_ARRAY_INPUT) if n not in _public_names())
    assert not stale, f"table names that are not public: {stale}"


# Several names share one driver: run each driver once per (shape, dtype).
_DRIVERS = {}
for _name, _fn in CASES.items():
    _DRIVERS.setdefault(_fn, _name)


# Every shape in float64, and every dtype in a 1-d and a 2-d shape (the drivers that need
# two operand shapes take them from their own tables, under shape (0,)).
COMBOS = ([(s, np.float64) for s in SHAPES]
          + [(s, d) for s in ((0,), (3, 0)) for d in DTYPES if d is not np.float64])


@pytest.mark.parametrize("shape,dtype", COMBOS, ids=lambda v: str(v) if isinstance(v, tuple)
                         else np.dtype(v).name)
@pytest.mark.parametrize("name", sorted(_DRIVERS.values()))
def test_empty_input(name, shape, dtype):
    CASES[name](shape, dtype)
