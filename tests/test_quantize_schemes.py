"""The two strategies of ``quantize`` / ``fake_quant`` agree bit for bit on numpy arrays.

``floatfmt.scaling.quantize._run`` chooses between the numpy kernels
(``quantize_schemes_fast``: chunked, in place, inexact quotients recomputed exactly)
and the reference written once over the array namespace (``quantize_schemes``, which
also serves tensors on every device).  Here both run on the same numpy arrays, scheme
by scheme, format by format and rounding mode by mode, and every output (element
values, codes, scales, zero points, scale codes, dequantised values and the fused
``fake_quant``) must have the same bits: zero mismatches is the only pass.  The
values span many binades, with signed zeros, values that round to the format's
subnormals and past its largest value, and (where the scheme defines them) Inf and NaN.
"""

from __future__ import annotations

import numpy as np
import pytest

from floatfmt.scaling.quantize import _options, _run


def _data(seed: int, shape=(6, 40), specials: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 12, shape))
    x.flat[:4] = [0.0, -0.0, 1e-30, -3e-25]
    x[-1] *= 1e-6  # a channel of tiny values (their own scale)
    if specials:
        x.flat[5:8] = [np.inf, -np.inf, np.nan]
    return x


def _bits(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "f":
        a = a.astype(np.float64)
        return np.where(np.isnan(a), np.float64(np.nan), a).view(np.int64)  # one NaN
    return a.astype(np.int64)


def _same(a, b) -> int:
    """Mismatching elements of two outputs (shape or kind mismatch counts as all)."""
    if a is None or b is None:
        return 0 if a is None and b is None else 1
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return max(a.size, b.size, 1)
    return int(np.count_nonzero(_bits(a) != _bits(b)))


def _outcome(fn):
    """fn()'s result, or the type of the exception it raised."""
    try:
        return fn()
    except (ValueError, TypeError) as e:
        return type(e)


FIELDS = ("elements", "scale", "zero_point", "scale_codes", "tensor_scale", "qmin", "qmax",
          "granularity", "axis", "block_shape")


def _compare(x, fmt, **options) -> int:
    opts = _options(options)
    fast = _run(x, fmt, False, "quantize", dict(opts), "fast")
    ref = _run(x, fmt, False, "quantize", dict(opts), "reference")
    bad = 0
    for name in FIELDS:
        a, b = getattr(fast, name), getattr(ref, name)
        if isinstance(a, (str, tuple)) or isinstance(b, (str, tuple)) or a is None or b is None:
            bad += a != b
        else:
            bad += _same(a, b)
    codes = [_outcome(lambda q=q: q.codes) for q in (fast, ref)]  # NaN: no code in some formats
    if isinstance(codes[0], type) or isinstance(codes[1], type):
        bad += codes[0] is not codes[1]
    else:
        bad += _same(*codes)
    bad += _same(fast.dequantize(), ref.dequantize())
    lo_f, hi_f = fast.limits()
    lo_r, hi_r = ref.limits()
    bad += _same(lo_f, lo_r) + _same(hi_f, hi_r)
    ff = _run(x, fmt, True, "fake_quant", dict(opts), "fast")
    fr = _run(x, fmt, True, "fake_quant", dict(opts), "reference")
    bad += _same(ff, fr) + (np.asarray(ff).dtype != np.asarray(fr).dtype)
    return bad


MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down")

INT_CASES = [
    ("int8", {}), ("int8", {"narrow_range": False}), ("uint8", {}),
    ("uint8", {"scheme": "asymmetric"}), ("int8", {"scheme": "asymmetric"}),
    ("int4", {"granularity": "channel"}), ("uint4", {"scheme": "asymmetric", "granularity": "channel", "axis": 1}),
    ("int8", {"calibration": "percentile", "percentile": 99.0}),
    ("int8", {"calibration": "percentile", "percentile": 90.0, "scheme": "asymmetric", "granularity": "channel"}),
    ("int8", {"calibration": "mse"}), ("uint8", {"calibration": "mse", "scheme": "asymmetric", "granularity": "channel"}),
    ("int8", {"pow2_scale": True}), ("int8", {"margin": 2}),
    ("int8", {"scale": 0.03}), ("uint8", {"scale": 0.1, "zero_point": 7}),
    ("int8", {"scale": [0.5, 0.25, 0.125, 3.0, 1e-3, 7.0], "granularity": "channel"}),
    ("int8", {"granularity": "group", "group_size": 16}),
    ("uint8", {"granularity": "group", "group_size": 7, "scheme": "asymmetric"}),
    ("int8", {"granularity": "block", "block": (4, 16)}),
]

FLOAT_CASES = [
    ("fp8_e4m3", {}), ("fp8_e5m2", {}), ("fp4_e2m1", {}), ("fp6_e3m2", {"granularity": "channel"}),
    ("fp8_e4m3", {"calibration": "percentile", "percentile": 95.0}),
    ("fp8_e4m3", {"calibration": "mse", "granularity": "channel"}),
    ("fp8_e4m3", {"pow2_scale": True, "margin": -1}), ("fp8_e5m2", {"scale": 3e-3}),
    ("fp8_e5m2", {"overflow": "inf", "scale": 1e-6}), ("fp8_e4m3", {"overflow": "nan", "scale": 1e-3}), ("bf16", {}), ("fp16", {"scale": 0.7}),
    ("fp64", {"scale": 3.0}), ("fp8_e4m3", {"granularity": "group", "group_size": 32}),
    ("fp8_e4m3", {"granularity": "block", "block": (3, 32)}),
    # Transformer Engine's and torchao's two-rounding conventions (scale_convention)
    ("fp8_e4m3", {"scale_convention": "te"}), ("fp8_e5m2", {"scale_convention": "torchao"}),
    ("fp8_e4m3", {"scale_convention": "te", "granularity": "channel", "pow2_scale": True}),
    ("fp4_e2m1", {"scale_convention": "torchao", "margin": 1, "granularity": "channel", "axis": 1}),
    ("fp8_e4m3", {"scale_convention": "te", "scale": 300.0}),
]

BLOCK_CASES = [(name, {"scale_rounding": sr}) for name in
               ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxint8")
               for sr in ("floor", "ceil", "even", "rceil")] + \
              [("mxfp8_e4m3", {"axis": 0}), ("nvfp4", {}), ("nvfp4", {"axis": 0}),
               ("nvfp4", {"tensor_scale": 0.01})]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt,options", INT_CASES + FLOAT_CASES + BLOCK_CASES)
def test_fast_equals_reference_on_numpy(fmt, options, mode):
    x = _data(hash((fmt, mode)) % 1000)
    assert _compare(x, fmt, rounding=mode, **options) == 0


@pytest.mark.parametrize("fmt,options", [c for c in FLOAT_CASES if "scale" not in c[1]
                                         and c[1].get("calibration", "max") == "max"]
                         + [c for c in BLOCK_CASES if c[0] != "nvfp4"])
def test_fast_equals_reference_with_inf_and_nan(fmt, options):
    """Inf and NaN under amax calibration (quantize's module docstring), on both."""
    x = _data(7, specials=True)
    assert _compare(x, fmt, **options) == 0
    assert _compare(x.astype(np.float32), fmt, **options) == 0


@pytest.mark.parametrize("fmt", ["int8", "nvfp4"])
def test_both_strategies_refuse_what_the_format_cannot_hold(fmt):
    x = _data(3, specials=True)
    for strategy in ("fast", "reference"):
        with pytest.raises(ValueError):
            _run(x, fmt, False, "quantize", _options({}), strategy)


def test_an_unknown_strategy_is_named():
    with pytest.raises(ValueError, match="fast, reference"):
        _run(np.ones(4), "int8", False, "quantize", _options({}), "quick")
