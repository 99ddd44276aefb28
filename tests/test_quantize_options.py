"""Options of ``quantize`` / ``fake_quant`` that do not apply to a format's kind raise
``ValueError`` naming the option, its value and what it applies to (issue 10).

The class covered: every (format kind x option) pair where the option does not apply,
each given a non-default value.  Before the fix ``quantize`` accepted them silently
(``quantize(x, "nvfp4", scheme="bogus")`` and ``quantize(x, "mxfp8_e4m3", scale=2.0)``
returned a result as if the option had not been given).  Checked on the old code
(commit 3153f20): 31 of the 33 pairs failed, for quantize and for fake_quant alike; only
group_size with MX / NVFP4 raised (block raised too, but without naming its value).

The table of what applies is written out here from the documented rules, not read
from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

import floatfmt as ff

# a non-default value of each option (one that would change the result if it applied)
GIVEN = {
    "scheme": "bogus", "granularity": "channel", "calibration": "percentile", "percentile": 50.0,
    "scale": 2.0, "zero_point": 3, "margin": 1, "pow2_scale": True, "narrow_range": False,
    "scale_rounding": "ceil", "overflow": "inf", "tensor_scale": 0.5, "group_size": 8,
    "block": (2, 2), "scale_convention": "te",
}

# options that apply, by kind (axis, rounding and rng apply to every kind)
APPLIES = {
    "int": {"scheme", "granularity", "calibration", "percentile", "scale", "zero_point", "margin",
            "pow2_scale", "narrow_range", "group_size", "block"},
    "float": {"scheme", "granularity", "calibration", "percentile", "scale", "margin",
              "pow2_scale", "overflow", "group_size", "block", "scale_convention"},
    "mx": {"scale_rounding"},
    "nvfp4": {"tensor_scale", "scale_convention"},
}
EXAMPLE = {"int": "int8", "float": "fp8_e4m3", "mx": "mxfp8_e4m3", "nvfp4": "nvfp4"}
# what the message must name as the home of the option (one kind that takes it)
HOME = {"scheme": "integer", "granularity": "integer", "calibration": "integer",
        "percentile": "integer", "scale": "integer", "zero_point": "integer", "margin": "integer",
        "pow2_scale": "integer", "narrow_range": "integer", "scale_rounding": "MX",
        "overflow": "float", "tensor_scale": "nvfp4", "group_size": "integer", "block": "integer",
        "scale_convention": "float"}

PAIRS = [(kind, opt) for kind in EXAMPLE for opt in GIVEN if opt not in APPLIES[kind]]


def test_the_table_covers_every_option():
    import inspect
    opts = {k for k, p in inspect.signature(ff.quantize).parameters.items()
            if p.kind is p.KEYWORD_ONLY}
    # ste (the tensor gradient rule) applies to every kind
    assert opts == set(GIVEN) | {"axis", "rounding", "rng", "ste"}
    assert len(PAIRS) == 35  # scale_convention (float and nvfp4): two more pairs


@pytest.mark.parametrize("kind, opt", PAIRS)
@pytest.mark.parametrize("fn", [ff.quantize, ff.fake_quant])
def test_an_option_that_does_not_apply_raises(fn, kind, opt):
    x = np.linspace(-1.0, 1.0, 64).reshape(4, 16)
    fmt = EXAMPLE[kind]
    with pytest.raises(ValueError) as err:
        fn(x, fmt, **{opt: GIVEN[opt]})
    msg = str(err.value)
    assert opt in msg and repr(GIVEN[opt]) in msg, msg
    if opt not in ("group_size", "block") or kind not in ("mx", "nvfp4"):
        assert "does not apply to" in msg and HOME[opt] in msg, msg


@pytest.mark.parametrize("fmt", ["int8", "uint4", "fp8_e5m2", "bf16", "mxfp4", "mxint8", "nvfp4"])
def test_defaults_given_explicitly_are_accepted(fmt):
    """An option spelled out at its default value changes nothing, so it passes."""
    import inspect
    x = np.linspace(-1.0, 1.0, 64).reshape(4, 16)
    defaults = {k: p.default for k, p in inspect.signature(ff.quantize).parameters.items()
                if p.kind is p.KEYWORD_ONLY}
    want = ff.quantize(x, fmt).dequantize()
    assert np.array_equal(ff.quantize(x, fmt, **defaults).dequantize(), want)
    assert np.array_equal(ff.fake_quant(x, fmt, **defaults), want)


@pytest.mark.parametrize("kind", list(EXAMPLE))
def test_options_that_apply_still_work(kind):
    x = np.linspace(-1.0, 1.0, 64).reshape(4, 16)
    fmt = EXAMPLE[kind]
    ff.quantize(x, fmt, axis=0, rounding="stochastic", rng=1)
    if kind == "mx":
        ff.quantize(x, fmt, scale_rounding="ceil")
    elif kind == "nvfp4":
        ff.quantize(x, fmt, tensor_scale=0.5)
        ff.quantize(x, fmt, scale_convention="te")
    else:
        ff.quantize(x, fmt, granularity="channel", calibration="percentile", percentile=50.0,
                    margin=1, pow2_scale=True)
        ff.quantize(x, fmt, scale=2.0)


def test_the_issue_examples():
    x = np.linspace(-1.0, 1.0, 64)
    for kw, fmt, words in [({"scheme": "bogus"}, "nvfp4", ("scheme='bogus'", "nvfp4")),
                           ({"scale": 2.0}, "mxfp8_e4m3", ("scale=2.0", "mxfp8_e4m3")),
                           ({"scale_rounding": "ceil"}, "int8", ("scale_rounding='ceil'", "int8"))]:
        with pytest.raises(ValueError) as err:
            ff.quantize(x, fmt, **kw)
        assert all(w in str(err.value) for w in words), str(err.value)
