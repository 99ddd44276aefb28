"""floatfmt name -> the numpy / ml_dtypes dtype with the same value set (the references).

``ML_DTYPES_LACKS``: registered formats whose ml_dtypes type the installed ml_dtypes does
not have (``float8_e5m3fnu`` came with ml_dtypes 0.7); their ml_dtypes comparisons are
skipped there, and tests/test_formats.py checks their value set against its definition.
"""

import ml_dtypes as md
import numpy as np

FLOAT_DTYPES = {
    "fp16": np.float16, "bf16": md.bfloat16,
    "fp8_e4m3": md.float8_e4m3fn, "fp8_e5m2": md.float8_e5m2,
    "fp8_e4m3fnuz": md.float8_e4m3fnuz, "fp8_e5m2fnuz": md.float8_e5m2fnuz,
    "fp8_e4m3b11fnuz": md.float8_e4m3b11fnuz,
    "fp8_e4m3_ieee": md.float8_e4m3, "fp8_e3m4": md.float8_e3m4,
    "fp6_e2m3": md.float6_e2m3fn, "fp6_e3m2": md.float6_e3m2fn, "fp4_e2m1": md.float4_e2m1fn,
    "e8m0": md.float8_e8m0fnu,
}
# floatfmt name -> ml_dtypes type name, for types only some supported releases have
_NEWER = {"fp8_e5m3fnu": "float8_e5m3fnu"}
ML_DTYPES_LACKS = {}
for _name, _ml_name in _NEWER.items():
    if hasattr(md, _ml_name):
        FLOAT_DTYPES[_name] = getattr(md, _ml_name)
    else:
        ML_DTYPES_LACKS[_name] = f"ml_dtypes {md.__version__} has no {_ml_name}"
INT_DTYPES = {"int8": np.int8, "uint8": np.uint8, "int4": md.int4, "uint4": md.uint4}
