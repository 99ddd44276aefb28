"""Block-scaled FP8 GEMM recipes as data: DeepSeek-V3's FP8 training GEMM.

DeepSeek-V3 (arXiv 2412.19437, sections 3.3.2 and 3.5.2; ``shared/reference``
section 10) runs every Linear in FP8 E4M3 with fine-grained scales:

1. activations ``x`` (M x K): one scale per 1 x 128 tile (a token's 128 channels),
   ``quantize(x, "fp8_e4m3", granularity="group", group_size=128, axis=-1)``;
2. weights ``w`` (K x N here, as ``ff.matmul`` takes them): one scale per 128 x 128
   block, ``quantize(w, "fp8_e4m3", granularity="block", block=(128, 128))``;
   a scale is ``amax / 448`` rounded once to fp32 (``pow2_scale``: rounded up to a
   power of two, the ``ue8m0`` scales of DeepSeek's V3.1 config);
3. the GEMM runs K in chunks of ``N_C = 128``: each chunk's FP8 products are summed
   on the tensor core from a zero accumulator (``model``, the H100 / H800 FP8 unit
   by default: steps of 32 products, 13 fraction bits, truncation), then the
   chunk's partial sum is promoted to FP32 on the CUDA cores, multiplied by the
   two scales and added to an FP32 accumulator.

The promotion's arithmetic is a choice (the paper does not state it):

* ``"separate"``: ``acc = fp32(acc + fp32(fp32(partial * s_a) * s_w))``, the
  expression ``acc += dot(a, b) * a_s * b_s`` of DeepSeek-V3's ``inference/kernel.py``
  evaluated as written (three roundings);
* ``"fma"``: ``acc = fma(partial, fp32(s_a * s_w), acc)``, one scale product then a
  fused multiply-add (what a compiler that contracts ``acc += s * partial`` gives).

That each chunk restarts the tensor-core accumulator at zero is implied by the
paper, not stated.  The activation scales of the inference kernel (``amax`` floored
at 1e-4) and the paper's E5M6 caches are not modelled.

    >>> import numpy as np, floatfmt as ff
    >>> x = np.ones((1, 256)); w = np.full((256, 2), 0.5)     # exactly 128
    >>> ff.recipe_matmul(x, w, "deepseek_v3").tolist()      # scales fp32(amax / 448)
    [[128.00001525878906, 128.00001525878906]]
    >>> r = get_recipe("deepseek_v3").replace(pow2_scale=True)  # power-of-two scales: exact
    >>> ff.recipe_matmul(x, w, r).tolist()
    [[128.0, 128.0]]
"""

from __future__ import annotations

import dataclasses
from typing import Any
from dataclasses import dataclass

import numpy as np

from ..core.cast import cast
from ..core.types import Values
from ..backend.namespace import is_tensor, namespace
from ..arith.accumulate import matmul
from ..arith.ops import add, fma, mul
from ..scaling.quantize import quantize
from ..backend.dispatch import from_host, host_kernels, tensor_entry, to_host
from ..scaling.quantized_tensor import QuantizedTensor
from ..arith.matrixunit.tensorcore import (TensorCoreModel, block_scaled_mma, get_block_model,
                                            get_model, mixed_block_format)
from .nvfp4_recipe import NVFP4_RECIPES, NVFP4Recipe, nvfp4_recipe_matmul

__all__ = ["BlockFP8Recipe", "RECIPES", "get_recipe", "recipe_matmul", "PROMOTIONS",
           "block_scaled_matmul"]

#: How a chunk's partial sum joins the FP32 accumulator (see the module docstring).
PROMOTIONS = ("separate", "fma")


@dataclass(frozen=True)
class BlockFP8Recipe:
    """A block-scaled FP8 GEMM recipe as data.

    Fields
    ------
    name : e.g. ``"deepseek_v3"``.
    fmt : element format of both operands (``"fp8_e4m3"``).
    act_group : activation scales: one per ``act_group`` consecutive elements of a row
        of ``x`` (1 x 128 tiles).
    weight_block : weight scales: one per ``(rows, cols)`` block of ``w`` (K x N).
    promote_every : ``N_C``, the products of K summed on the tensor core before the
        partial sum goes to the FP32 accumulator; must divide ``act_group`` and
        ``weight_block[0]`` (each chunk then has one scale per row and column).
    model : the tensor-core model of the in-chunk sums (a preset name or a
        ``TensorCoreModel`` taking ``fmt`` inputs).
    promotion : ``"separate"`` or ``"fma"`` (unconfirmed; see the module docstring).
    pow2_scale : round every scale up to a power of two (``ue8m0`` scales).
    out_fmt : format of the output (``"fp32"``; ``"bf16"`` rounds the FP32 result once more).
    description : free text (sources).
    """

    name: str
    fmt: str = "fp8_e4m3"
    act_group: int = 128
    weight_block: tuple = (128, 128)
    promote_every: int = 128
    model: object = "h100"
    promotion: str = "separate"
    pow2_scale: bool = False
    out_fmt: str = "fp32"
    description: str = ""

    def __post_init__(self):
        for what, v in (("act_group", self.act_group), ("promote_every", self.promote_every)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{what} must be a positive integer, not {v!r}")
        wb = self.weight_block
        if (not isinstance(wb, tuple) or len(wb) != 2
                or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in wb)):
            raise ValueError(f"weight_block must be a pair of positive integers, not {wb!r}")
        if self.act_group % self.promote_every or wb[0] % self.promote_every:
            raise ValueError(f"promote_every={self.promote_every} must divide act_group={self.act_group} "
                             f"and weight_block[0]={wb[0]} (one scale per row and column in each chunk)")
        if self.promotion not in PROMOTIONS:
            raise ValueError(f"unknown promotion {self.promotion!r}. Valid: {', '.join(PROMOTIONS)}.")
        get_model(self.model, self.fmt)  # raises for a model without these inputs

    def replace(self, **changes) -> "BlockFP8Recipe":
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


RECIPES = {
    "deepseek_v3": BlockFP8Recipe(
        name="deepseek_v3",
        description="DeepSeek-V3 FP8 training GEMM (arXiv 2412.19437 sections 3.3.2, 3.5.2): E4M3 "
                    "operands, 1x128 activation tiles, 128x128 weight blocks, amax/448 fp32 scales, "
                    "FP32 promotion every 128 products of K on H800 (Hopper) tensor cores"),
}


def get_recipe(recipe) -> BlockFP8Recipe:
    """A ``BlockFP8Recipe`` from a name in ``RECIPES`` (or the recipe itself)."""
    if isinstance(recipe, BlockFP8Recipe):
        return recipe
    if not isinstance(recipe, str):
        raise TypeError(f"recipe must be a name or a BlockFP8Recipe, not {type(recipe).__name__}")
    key = recipe.strip().lower().replace("-", "_")
    if key not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}. Valid: {', '.join(RECIPES)} (or a BlockFP8Recipe).")
    return RECIPES[key]


def is_nvfp4_recipe(recipe: Any) -> bool:
    """Whether ``recipe`` names (or is) an NVFP4 training recipe (``floatfmt.training.nvfp4_recipe``)."""
    if isinstance(recipe, NVFP4Recipe):
        return True
    return isinstance(recipe, str) and recipe.strip().lower().replace("-", "_") in NVFP4_RECIPES


def _operands(x, w, r: BlockFP8Recipe):
    if not is_tensor(x):
        x = np.asarray(x, np.float64) if not isinstance(x, np.ndarray) else x
    if not is_tensor(w):
        w = np.asarray(w, np.float64) if not isinstance(w, np.ndarray) else w
    if x.ndim != 2 or w.ndim != 2:
        raise ValueError(f"recipe_matmul needs 2-D x (M x K) and w (K x N), not shapes {x.shape} and {w.shape}")
    if x.shape[1] != w.shape[0]:
        raise ValueError(f"recipe_matmul: shapes {x.shape} and {w.shape} do not align (K differs)")
    K, N = w.shape
    qa = quantize(x, r.fmt, granularity="group", group_size=max(min(r.act_group, K), 1), axis=-1,
                  pow2_scale=r.pow2_scale)
    qw = quantize(w, r.fmt, granularity="block",
                  block=(max(min(r.weight_block[0], K), 1), max(min(r.weight_block[1], N), 1)),
                  pow2_scale=r.pow2_scale)
    return qa, qw


def _host_fields(q: QuantizedTensor) -> dict[str, Any]:
    """The tensor fields of ``q`` as numpy views (``dispatch.to_host``), and an empty
    cache (a cached tensor is not carried over)."""
    out: dict[str, Any] = {f.name: to_host(getattr(q, f.name)) for f in dataclasses.fields(q)
                           if f.init and not f.name.startswith("_")
                           and is_tensor(getattr(q, f.name))}
    return {**out, "_cache": {}}


@tensor_entry('recipe_matmul', ('x', 'w'), portable=True)
def recipe_matmul(x: Values, w: Values,
                  recipe: str | BlockFP8Recipe | NVFP4Recipe = "deepseek_v3", *,
                  quantized: tuple[QuantizedTensor, QuantizedTensor] | None = None) -> np.ndarray:
    """``x @ w`` (M x K times K x N) as a block-scaled FP8 recipe computes it.

    Steps (see the module docstring): quantise ``x`` in 1 x ``act_group`` tiles and
    ``w`` in ``weight_block`` blocks (``ff.quantize``, one rounding of each ``x / s``);
    for each chunk of ``promote_every`` along K, the chunk's products through the
    tensor-core ``model`` from a zero accumulator; then promotion into an FP32
    accumulator (``promotion``); finally the output format.  Every operation is
    rounded once by the rounding routine.  Operands shorter than a tile or block
    use the whole axis.  ``quantized=(qa, qw)`` passes operands already quantised
    the recipe's way (``QuantizedTensor``) instead of ``x`` and ``w``.

    ``recipe="nvfp4_training"`` (or an ``NVFP4Recipe``): NVIDIA's NVFP4 forward GEMM
    (``floatfmt.training.nvfp4_recipe.nvfp4_recipe_matmul``; numpy arrays and CPU tensors).

    Returns float64 values of ``out_fmt``; torch tensors ``x``, ``w`` give a float64
    tensor on their device, every step computed there (``floatfmt.backend.dispatch``).
    """
    if isinstance(recipe, (str, NVFP4Recipe)) and is_nvfp4_recipe(recipe):  # branch nvfp4
        if quantized is not None:
            raise ValueError("quantized= is for the block-FP8 recipes")
        if any(is_tensor(v) and not host_kernels(v) for v in (x, w)):
            dev = next(v.device for v in (x, w) if is_tensor(v))
            raise NotImplementedError(
                f"floatfmt.recipe_matmul: the NVFP4 training recipe has no {dev.type} "
                "implementation yet (numpy arrays and CPU tensors only); floatfmt does not "
                "copy the operands to the host silently: call .cpu() yourself")
        return nvfp4_recipe_matmul(x, w, recipe)
    r = get_recipe(recipe)
    if quantized is None:
        qa, qw = _operands(x, w, r)
    else:
        qa, qw = quantized
        if not (isinstance(qa, QuantizedTensor) and isinstance(qw, QuantizedTensor)):
            raise TypeError("quantized must be a pair of QuantizedTensor (activations, weights)")
        if is_tensor(qa.elements) and host_kernels(qa.elements):
            # operands quantised from CPU tensors: the numpy kernels on views of them
            return from_host(recipe_matmul(x, w, r, quantized=(
                dataclasses.replace(qa, **_host_fields(qa)),
                dataclasses.replace(qw, **_host_fields(qw)))), qa.elements.device)
    # written once over the array namespace: numpy arrays, and tensors of any device
    # (``tensor_entry(portable=True)``), every step through the public entries
    a, b = qa.elements, qw.elements
    xp = namespace(a)
    K = a.shape[1]
    ga, (gk, gn) = qa.block_size, qw.block_size
    model = get_model(r.model, r.fmt)
    acc: Any = xp.zeros((a.shape[0], b.shape[1]), xp.asfloat(a[:0, :0]))
    s_rows = xp.asfloat(qa.scale, a)
    sw_cols = xp.narrow(xp.repeat(xp.asfloat(qw.scale, a), gn, 1), 1, b.shape[1])
    for k0 in range(0, K, r.promote_every):
        sl = slice(k0, k0 + r.promote_every)
        # the chunk's products through the model from a zero accumulator: its fp32
        # accumulator comes back unchanged (no alpha, c or out_fmt)
        partial = matmul(a[:, sl], b[sl, :], r.fmt, model=model)
        s_a = s_rows[:, k0 // ga][:, None]
        s_w = sw_cols[k0 // gk][None, :]
        if r.promotion == "separate":
            acc = add(acc, mul(mul(partial, s_a, "fp32"), s_w, "fp32"), "fp32")
        else:
            acc = fma(partial, mul(s_a, s_w, "fp32"), acc, "fp32")
    acc = xp.asfloat(acc)
    return acc if r.out_fmt == "fp32" else xp.asfloat(cast(acc, r.out_fmt))


def _blocked_operand(q: Any, fmt: str | None, axis: int, what: str) -> QuantizedTensor:
    """q quantised with fmt along ``axis`` (-1 for A, -2 for B), or q itself, checked."""
    if not isinstance(q, QuantizedTensor):
        if fmt is None:
            raise ValueError("block_scaled_matmul: give fmt (e.g. 'mxfp8_e4m3', 'nvfp4') or "
                             "QuantizedTensor operands")
        q = quantize(q, fmt, axis=axis)
    nd = q.elements.ndim
    if q.granularity != "block" or nd < 2 or q.axis != nd + axis:
        raise ValueError(f"block_scaled_matmul: {what} must be an MX / NVFP4 tensor blocked "
                         f"along its K axis ({axis}), not {q!r}")
    if fmt is not None and q.fmt != str(fmt).strip().lower():
        raise ValueError(f"block_scaled_matmul: {what} is {q.fmt}, not {fmt}")
    return q


def _block_scaled(a: Any, b: Any, fmt: str | None, model: Any, c: Any) -> Any:
    """The steps of ``block_scaled_matmul``, written once over the public entries
    (``quantize``, ``block_scaled_mma``, ``mul``): numpy operands run the numpy
    kernels, tensors the device code of each step (``floatfmt.backend.dispatch``;
    the entry is ``portable``: this body is its own device code)."""
    qa = _blocked_operand(a, fmt, -1, "a")
    qb = _blocked_operand(b, fmt, -2, "b")
    m = get_block_model(model, qa.fmt)
    b_fmt = None
    if qa.fmt != qb.fmt:  # kind::mxf8f6f4 takes A and B types independently
        mixed_block_format(model if isinstance(model, TensorCoreModel) else m.name.split("/")[0],
                           qa.fmt, qb.fmt)  # raises for formats the unit does not mix
        b_fmt = qb.fmt
    r = block_scaled_mma(qa.elements, qa.scale, qb.elements, qb.scale,
                         0.0 if c is None else c, m, b_block_fmt=b_fmt)
    if qa.tensor_scale is not None or qb.tensor_scale is not None:
        ts = mul(qa.tensor_scale if qa.tensor_scale is not None else 1.0,
                 qb.tensor_scale if qb.tensor_scale is not None else 1.0, "fp32")
        r = mul(r, ts, "fp32")
    return r


@tensor_entry('block_scaled_matmul', ('a', 'b', 'c'), portable=True)
def block_scaled_matmul(a: Any, b: Any, fmt: str | None = None, model: Any = "b200",
                        c: Any = None) -> np.ndarray:
    """``a @ b (+ c)`` on a block-scaled matrix unit: Blackwell MXFP8 / MXFP6 / MXFP4 /
    NVFP4 MMA, with the block scales applied inside the instruction.

    ``a`` (..., M, K) and ``b`` (..., K, N) are arrays, quantised here with
    ``ff.quantize(a, fmt, axis=-1)`` and ``ff.quantize(b, fmt, axis=-2)`` (blocks run
    along K, one scale per row of A and per column of B for each block), or
    ``QuantizedTensor`` operands already quantised that way.  ``fmt``: ``"mxfp8_e4m3"``,
    ``"mxfp8_e5m2"``, ``"mxfp6_e2m3"``, ``"mxfp6_e3m2"``, ``"mxfp4_e2m1"`` or ``"nvfp4"``.
    ``QuantizedTensor`` operands of two formats (``fmt=None``: E5M2 gradients times E4M3
    weights) run where the unit mixes them (``kind::mxf8f6f4``: any two MX formats with
    ue8m0 scales per 32; ``tensorcore.mixed_block_format``), each read in its own format.
    ``model``: ``"b200"`` (``kind::mxf8f6f4``, ST-FDPA, for the MX formats;
    ``kind::mxf4nvf4``, GST-FDPA, for NVFP4), ``"b200_mxf4nvf4"`` (GST-FDPA for MXFP4
    too), a preset name such as ``"b200/mxfp8_e4m3"`` or a ``TensorCoreModel``; see
    ``floatfmt.arith.matrixunit.tensorcore.block_scaled_mma`` for the arithmetic.  ``c``: the fp32
    accumulator input of the unit (None: +0).

    NVFP4's per-tensor fp32 scales are not part of the instruction: the result is
    multiplied by ``fp32(ts_a * ts_b)`` in one fp32 round-to-nearest-even multiply (an
    epilogue alpha, as cuBLASLt applies it; a choice, unconfirmed).  Returns float64
    values of the fp32 result.  Tensors (or ``QuantizedTensor`` operands holding
    tensors) give a tensor on their device, every step computed there.

    Below, K = 64: ones times 32 halves and 32 values 1 + 2**-3, every block's scale 1;
    the fused sum 16 + 36 is exact.

    >>> import numpy as np
    >>> a = np.ones((1, 64)); b = np.full((64, 1), 1 + 2**-3); b[::2] = 0.5
    >>> float(block_scaled_matmul(a, b, "mxfp8_e4m3")[0, 0])
    52.0
    """
    r = _block_scaled(a, b, fmt, model, c)
    # QuantizedTensor operands holding tensors (no tensor among a, b, c) reach here and
    # their steps ran on the tensors' device: keep the tensor
    return r if is_tensor(r) else np.asarray(r, np.float64)
