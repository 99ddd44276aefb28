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

from ._cast import cast
from .codec import classify, decode, encode, next_down, next_up, ulp, values
from ._formats import Format, formats, get_format, p3109, p3109_formats, register
from ._info import BlockFormatInfo, FormatInfo, info
from ._block_formats import BlockFormat, block_formats, get_block_format
from .packing import pack, unpack
from .fpflags import FlagCounts, flags
from .rounding import MODES, OVERFLOWS
from .threads import get_num_threads, limit_threads, set_num_threads

from ._version import __version__ as __version__

# name -> module, loaded on first attribute access (keeps `import floatfmt` fast).
_LAZY = {
    # arithmetic and accumulation
    "add": "ops", "sub": "ops", "mul": "ops", "div": "ops", "fma": "ops", "sqrt": "ops",
    "neg": "ops", "abs": "ops", "minimum": "ops", "maximum": "ops",
    "FPArray": "fparray", "array": "fparray", "scalar": "fparray",
    "sum": "accumulate", "dot": "accumulate", "matmul": "accumulate",
    "mma": "tensorcore", "TensorCoreModel": "tensorcore", "tensorcore_models": "tensorcore",
    # scaling and training
    "quantize": "quantization", "dequantize": "quantized", "fake_quant": "quantization",
    "QuantizedTensor": "quantized", "int_matmul": "intgemm",
    "DelayedScaling": "delayedscale", "LossScaler": "lossscale",
    "compare_quantization": "quantdemo", "quantization_error": "quantdemo",
    "master_weights_demo": "quantdemo",
    # block-scaled FP8 GEMM recipes (DeepSeek-V3)
    "recipe_matmul": "recipes", "BlockFP8Recipe": "recipes",
    "block_scaled_matmul": "recipes",
    # teaching: explanations and format tables
    "explain": "explaining", "compare": "comparison",
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
