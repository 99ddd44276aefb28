"""floatfmt: bit-exact emulation of deep-learning number formats, and lessons built on it.

    >>> import floatfmt as ff
    >>> ff.cast(0.1, "bf16")
    0.10009765625
    >>> hex(ff.encode(0.1, "fp8_e4m3"))
    '0x1d'

The public API is the names below; every other module is an implementation
detail.  Layers above the core (arithmetic, tensor cores, scaling, teaching,
GPU checks) are imported on first use.
"""

from importlib import import_module

from .core.cast import cast
from .core.codec import classify, decode, encode, next_down, next_up, ulp, values
from .core.formats import Format, formats, get_format, p3109, p3109_formats, register
from .core.info import BlockFormatInfo, FormatInfo, info
from .core.block_formats import BlockFormat, block_formats, get_block_format
from .core.packing import pack, unpack
from .core.flags import FlagCounts, flags
from .core.rounding import MODES, OVERFLOWS
from .core.threads import get_num_threads, limit_threads, set_num_threads

from ._version import __version__ as __version__

# name -> module, loaded on first attribute access (keeps `import floatfmt` fast).
_LAZY = {
    # arithmetic and accumulation
    "add": "arith.ops", "sub": "arith.ops", "mul": "arith.ops", "div": "arith.ops", "fma": "arith.ops", "sqrt": "arith.ops",
    "neg": "arith.ops", "abs": "arith.ops", "minimum": "arith.ops", "maximum": "arith.ops",
    "FPArray": "arith.fparray", "array": "arith.fparray", "scalar": "arith.fparray",
    "sum": "arith.accumulate", "dot": "arith.accumulate", "matmul": "arith.accumulate",
    "mma": "arith.matrixunit.tensorcore", "TensorCoreModel": "arith.matrixunit.tensorcore", "tensorcore_models": "arith.matrixunit.tensorcore",
    "set_matmul_kernel": "arith.matrixunit.tensorcore_fused", "get_matmul_kernel": "arith.matrixunit.tensorcore_fused",
    "matmul_kernel": "arith.matrixunit.tensorcore_fused",
    # scaling and training
    "quantize": "scaling.quantize", "dequantize": "scaling.quantized_tensor", "fake_quant": "scaling.quantize",
    "QuantizedTensor": "scaling.quantized_tensor", "int_matmul": "scaling.int_gemm",
    "DelayedScaling": "training.delayed_scaling", "LossScaler": "training.loss_scaling",
    "compare_quantization": "teach.quantization_demo", "quantization_error": "teach.quantization_demo",
    "master_weights_demo": "teach.quantization_demo",
    # block-scaled FP8 GEMM recipes (DeepSeek-V3)
    "recipe_matmul": "training.recipes", "BlockFP8Recipe": "training.recipes",
    "block_scaled_matmul": "training.recipes",
    # teaching: explanations and format tables
    "explain": "teach.explain.entry", "compare": "teach.compare",
}

__all__ = ["cast", "explain", "compare", "encode", "decode", "classify", "next_up", "next_down", "ulp", "values",
           "pack", "unpack", "flags", "FlagCounts",
           "Format", "FormatInfo", "formats", "get_format", "register", "info", "p3109",
           "p3109_formats",
           "BlockFormat", "BlockFormatInfo", "block_formats", "get_block_format",
           "MODES", "OVERFLOWS", "get_num_threads", "set_num_threads", "limit_threads", *_LAZY]


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'floatfmt' has no attribute {name!r}")
    value = getattr(import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
