"""Precision recipes for ``floatfmt.torch.emulate``: what every emulated GEMM does, as data.

A ``Recipe`` says, for each ``nn.Linear`` (and each ``floatfmt.torch.matmul``):

* the format of the forward operands (inputs and weights, ``fwd_fmt``) and of the
  output gradient in backward (``bwd_fmt``);
* how they are scaled into that format (``scaling``):

  ``"none"``     ``ff.cast(x, fmt)`` with the format's own overflow rule (fp16: Inf,
                 OCP E4M3: NaN), no scale;
  ``"tensor"``   current per-tensor scaling, ``ff.quantize(x, fmt)``
                 (``scale = fp32(amax / max)``, saturating);
  ``"delayed"``  per-tensor scaling from an amax history, ``ff.DelayedScaling``
                 (``history_len``, ``amax_algo``, ``margin``), Transformer Engine's recipe;
  ``"block"``    MX or NVFP4 block scaling, ``ff.quantize(x, fmt, axis=k)`` with ``k``
                 the axis the GEMM reduces over (``fwd_fmt``/``bwd_fmt`` an ``mx*`` name
                 or ``"nvfp4"``);

* the GEMM: a tensor-core ``model`` (a GPU name such as ``"h100"``, or a
  ``TensorCoreModel``) or, with ``model=None``, an ``acc_fmt`` accumulator summed in
  ``order`` (``ff.matmul``'s rules); block recipes take a block-scaled unit
  (``"b200"``, ``"b200_mxf4nvf4"``: ``ff.block_scaled_matmul``'s models; ``fwd_fmt`` and
  ``bwd_fmt`` may differ where the unit mixes them, as ``kind::mxf8f6f4`` does MX formats);
* the output formats: ``out_fmt`` for the forward output and the input gradient,
  ``wgrad_fmt`` for the weight (and bias) gradient;
* ``loss_scaling``: whether the recipe expects the loss to be scaled (fp16); the
  scaler itself is the user's (``ff.LossScaler`` or ``torch.amp.GradScaler``);
* ``policy``: which ops outside the GEMMs are rounded (``floatfmt.torch.policy``):
  ``"autocast"`` (GEMM-like ops in the recipe's formats, everything else left in
  fp32, as torch.autocast's lists put softmax, norms, losses and reductions) or
  ``"pure"`` (every arithmetic op's output rounded to ``out_fmt`` too, as a model
  cast to bf16 / fp16 computes);
* ``gemm``: ``"exact"`` (the matrix-unit / accumulator model above) or ``"fast"``
  (the same quantised operands, products summed by the BLAS in float32, the same
  epilogue and output rounding: see ``floatfmt.torch.emulation.gemm``);
* quantiser options (``operand_options`` gives them to ``ff.quantize`` / ``ff.cast``):
  ``scale_rounding`` of MX block scales (``"floor"``: OCP; ``"rceil"``: NVIDIA's MXFP8
  rule; ``"ceil"``, ``"even"``; see ``ff.mx_shared_exponent``), ``scale_convention`` of
  per-tensor scales (``"exact"``, or Transformer Engine's / torchao's ``"te"`` /
  ``"torchao"``: ``floatfmt.scaling.scale_convention``), and ``grad_rounding``: how the output
  gradient is rounded into ``bwd_fmt`` (``"stochastic"``: stochastic rounding of
  gradients, as FP4 training recipes do);
* ``granularity`` of current scaling (``scaling="tensor"``): ``"tensor"`` (one scale an
  operand) or ``"rowwise"`` (torchao's ``ScalingGranularity.AXISWISE``: one scale per
  row along the axis each GEMM reduces over, applied in the epilogue as an outer
  product: ``floatfmt.torch.emulation``), and ``pow2_scale`` (scales rounded down to
  powers of two, torchao's ``round_scales_to_power_of_2``).

A user's own recipe is ``Recipe(name=..., ...)`` or ``get_recipe("bf16").replace(...)``.

>>> r = get_recipe("fp8_tensorwise")
>>> r.fwd_fmt, r.bwd_fmt, r.scaling, r.model
('fp8_e4m3', 'fp8_e5m2', 'delayed', 'h100')
>>> get_recipe("bf16").replace(name="bf16_a100", model="a100").model
'a100'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..core.block_formats import get_block_format, is_block_format
from ..core.formats import get_format
from ..core.names import unknown_name
from ..arith.accumulate import ORDERS
from ..scaling.mx_nvfp4 import SCALE_ROUNDINGS
from ..scaling.scale_convention import check_convention
from ..training.nvfp4_recipe import NVFP4_RECIPES, NVFP4Recipe
from ..arith.matrixunit.tensorcore import (TensorCoreModel, get_block_model, get_model,
                                            mixed_block_format)

__all__ = ["Recipe", "RECIPES", "SCALINGS", "POLICIES", "GEMMS", "get_recipe", "recipes"]

#: How operands are brought into their format (see the module docstring).
SCALINGS = ("none", "tensor", "delayed", "block")
#: ``grad_rounding`` values.
GRAD_ROUNDINGS = ("nearest_even", "stochastic")
#: ``granularity`` values (current scaling): one scale an operand, or one a row along K.
GRANULARITIES = ("tensor", "rowwise")

#: Op policies (``floatfmt.torch.policy``) and GEMM modes a recipe may name.
POLICIES = ("autocast", "pure")
GEMMS = ("exact", "fast")


@dataclass(frozen=True)
class Recipe:
    """A precision recipe for emulated GEMMs (fields: see the module docstring).

    Fields
    ------
    name : e.g. ``"bf16"``.
    fwd_fmt : format of the forward operands (x and W), e.g. ``"bf16"``, ``"fp8_e4m3"``,
        ``"mxfp4"``.
    bwd_fmt : format of the output gradient (the backward GEMMs' other operand).
    scaling : ``"none"``, ``"tensor"``, ``"delayed"`` or ``"block"``.
    model : tensor-core model (GPU name or ``TensorCoreModel``), or None for ``acc_fmt``.
    acc_fmt : accumulator format (with ``model``: ``"fp32"``, or ``"fp16"`` where the unit has one).
    order : accumulation order without a model (``ff.matmul``'s ``order``).
    out_fmt : format of the forward output and of the input gradient.
    wgrad_fmt : format of the weight and bias gradients.
    history_len, amax_algo, margin : ``ff.DelayedScaling``'s settings (``scaling="delayed"``).
    loss_scaling : the recipe needs a scaled loss (fp16 gradients underflow without it).
    policy : ``"autocast"`` or ``"pure"``: which ops besides the GEMMs are rounded.
    gemm : ``"exact"`` (the model) or ``"fast"`` (float32 BLAS sums of the same operands).
    description : free text.
    scale_rounding : MX block-scale rounding (``scaling="block"`` with ``mx*`` formats):
        ``"floor"`` (OCP, the default), ``"rceil"`` (NVIDIA MXFP8), ``"ceil"``, ``"even"``.
    scale_convention : per-tensor scales (``"tensor"``): ``"exact"`` (the default),
        ``"te"`` or ``"torchao"`` (``floatfmt.scaling.scale_convention``).
    grad_rounding : rounding of the output gradient into ``bwd_fmt``: ``"nearest_even"``
        (the default) or ``"stochastic"``.
    weight_block_2d : NVFP4 with ``scale_convention="te"``: weights quantised in 16 x 16
        tiles (one E4M3 scale each), so ``W`` and ``W.T`` quantise alike.
    wgrad_rht : NVFP4 with ``scale_convention="te"``: the random Hadamard transform
        (``floatfmt.scaling.hadamard``) on both inputs of each weight-gradient GEMM.
    granularity : ``scaling="tensor"``: ``"tensor"`` (the default) or ``"rowwise"`` (one
        scale per row of each operand along the GEMM's reduction axis, in every GEMM).
    pow2_scale : ``scaling="tensor"``: each scale a power of two (``ff.quantize``'s ``pow2_scale``).
    keep_first, keep_last : that many of the model's first and last GEMM layers (modules
        with a weight of two or more dimensions, in ``model.modules()`` order) run under
        ``high_precision`` instead (``emulate``).
    high_precision : the recipe (name) of those layers.
    """

    name: str
    fwd_fmt: str = "fp32"
    bwd_fmt: str = "fp32"
    scaling: str = "none"
    model: str | TensorCoreModel | None = None
    acc_fmt: str = "fp32"
    order: str = "sequential"
    out_fmt: str = "fp32"
    wgrad_fmt: str = "fp32"
    history_len: int = 16
    amax_algo: str = "max"
    margin: int = 0
    loss_scaling: bool = False
    description: str = ""
    policy: str = "autocast"
    gemm: str = "exact"
    scale_rounding: str = "floor"
    scale_convention: str = "exact"
    grad_rounding: str = "nearest_even"
    # branch nvfp4: NVIDIA's NVFP4 training recipe (floatfmt.training.nvfp4_recipe)
    weight_block_2d: bool = False
    wgrad_rht: bool = False
    keep_first: int = 0
    keep_last: int = 0
    high_precision: str = "bf16"
    granularity: str = "tensor"  # branch nvq: rowwise FP8 (torchao's AXISWISE)
    pow2_scale: bool = False

    def __post_init__(self) -> None:
        if self.scaling not in SCALINGS:
            raise unknown_name("scaling", self.scaling, SCALINGS)
        if self.order not in ORDERS:
            raise unknown_name("order", self.order, ORDERS)
        if self.policy not in POLICIES:
            raise unknown_name("policy", self.policy, POLICIES)
        if self.gemm not in GEMMS:
            raise unknown_name("gemm", self.gemm, GEMMS)
        for what in ("fwd_fmt", "bwd_fmt"):
            fmt = getattr(self, what)
            if not isinstance(fmt, str):
                raise TypeError(f"{what} must be a format name, not {type(fmt).__name__}")
            if self.scaling == "block":
                get_block_format(fmt)  # raises, listing the block formats
            elif is_block_format(fmt):
                raise ValueError(f"{what}={fmt!r} is a block format: it needs scaling='block', "
                                 f"not {self.scaling!r}")
            else:
                _check_narrow(get_format(fmt), what)
        for what in ("out_fmt", "wgrad_fmt", "acc_fmt"):
            _check_narrow(get_format(getattr(self, what)), what)
        if self.model is not None and self.scaling == "block":  # branch b200
            check_block_unit(self)
        elif self.model is not None:
            if self.order != "sequential":
                raise ValueError("order does not apply with a tensor-core model (it fixes the order)")
            get_model(self.model, self.fwd_fmt, self.acc_fmt)  # raises for a unit without these inputs
            get_model(self.model, self.bwd_fmt, self.acc_fmt)
        if self.amax_algo not in ("max", "most_recent"):
            raise unknown_name("amax_algo", self.amax_algo, ("max", "most_recent"))
        if not isinstance(self.history_len, int) or self.history_len < 1:
            raise ValueError(f"history_len must be a positive integer, not {self.history_len!r}")
        self._check_quantiser_options()

    def _check_quantiser_options(self) -> None:
        if self.scale_rounding not in SCALE_ROUNDINGS:
            raise unknown_name("scale_rounding", self.scale_rounding, SCALE_ROUNDINGS)
        mx = self.scaling == "block" and all(f.startswith("mx") for f in (self.fwd_fmt, self.bwd_fmt))
        if self.scale_rounding != "floor" and not mx:
            raise ValueError(f"scale_rounding={self.scale_rounding!r} applies to MX block "
                             "scaling (scaling='block' with mx* formats)")
        check_convention(self.scale_convention)
        nv_te = self.scaling == "block" and self.scale_convention == "te" and \
            self.fwd_fmt == self.bwd_fmt == "nvfp4"
        if self.scale_convention != "exact" and self.scaling != "tensor" and not nv_te:
            raise ValueError(f"scale_convention={self.scale_convention!r} applies to "
                             "scaling='tensor' (current per-tensor scales), and 'te' to NVFP4 blocks")
        if (self.weight_block_2d or self.wgrad_rht) and not nv_te:
            raise ValueError("weight_block_2d and wgrad_rht apply to NVFP4 block scaling with "
                             "scale_convention='te' (fwd_fmt = bwd_fmt = 'nvfp4')")
        for what in ("keep_first", "keep_last"):
            n = getattr(self, what)
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise ValueError(f"{what} must be a non-negative integer, not {n!r}")
        if self.grad_rounding not in GRAD_ROUNDINGS:
            raise unknown_name("grad_rounding", self.grad_rounding, GRAD_ROUNDINGS)
        if self.granularity not in GRANULARITIES:
            raise unknown_name("granularity", self.granularity, GRANULARITIES)
        if (self.granularity != "tensor" or self.pow2_scale) and self.scaling != "tensor":
            raise ValueError("granularity='rowwise' and pow2_scale apply to current scaling "
                             f"(scaling='tensor'), not scaling={self.scaling!r}")

    def operand_options(self, role: str = "forward") -> dict:
        """The options ``ff.quantize`` (block / tensor scaling) or ``ff.cast``
        (``scaling="none"``: only ``rounding``) takes for an operand of ``role``
        (``"forward"``: x and W; ``"backward"``: the output gradient).

        >>> get_recipe("mxfp8").replace(scale_rounding="rceil").operand_options()
        {'scale_rounding': 'rceil'}
        >>> get_recipe("bf16").replace(grad_rounding="stochastic").operand_options("backward")
        {'rounding': 'stochastic'}
        """
        opts: dict = {}
        if self.scale_rounding != "floor":
            opts["scale_rounding"] = self.scale_rounding
        if self.scale_convention != "exact" and self.scaling == "tensor":
            opts["scale_convention"] = self.scale_convention
        if self.pow2_scale:
            opts["pow2_scale"] = True
        if role == "backward" and self.grad_rounding != "nearest_even":
            opts["rounding"] = self.grad_rounding
        return opts

    def replace(self, **changes: object) -> "Recipe":
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def check_block_unit(r: "Recipe") -> None:
    """A block recipe's ``model`` must be a block-scaled unit (``"b200"``,
    ``"b200_mxf4nvf4"``, a preset ``"b200/mxfp8_e4m3"`` or a block-scaled
    ``TensorCoreModel``) taking ``fwd_fmt``, and ``bwd_fmt`` with it where they differ (the
    backward GEMMs multiply a ``bwd_fmt`` gradient by a ``fwd_fmt`` operand:
    ``tensorcore.mixed_block_format``); it accumulates in fp32 and fixes the order."""
    assert r.model is not None
    get_block_model(r.model, r.fwd_fmt)  # raises, listing the block-scaled models
    if r.bwd_fmt != r.fwd_fmt:
        unit = r.model if isinstance(r.model, TensorCoreModel) else str(r.model).partition("/")[0]
        mixed_block_format(unit, r.fwd_fmt, r.bwd_fmt)  # raises for formats the unit cannot mix
    if r.acc_fmt != "fp32" or r.order != "sequential":
        raise ValueError("a block-scaled unit accumulates in fp32 in its own order: acc_fmt must "
                         "be 'fp32' and order 'sequential'")
    if r.scale_convention == "te":
        raise ValueError("scale_convention='te' NVFP4 operands (2-D tiles, RHT) are not run on a "
                         "block-scaled unit model yet: use model=None")


def _check_narrow(f, what: str) -> None:
    """Every emulated value must fit a float32 tensor exactly (no second rounding on the way back)."""
    fp32 = get_format("fp32")
    if f.kind != "float" or f.mbits > fp32.mbits or f.emax > fp32.emax or f.emin < fp32.emin:
        raise ValueError(f"{what}={f.name!r}: emulated tensors are float32, so formats must be "
                         "float formats no wider than fp32")


def from_nvfp4_recipe(nr: NVFP4Recipe) -> Recipe:
    """The ``emulate`` recipe of an NVFP4 training recipe (``floatfmt.training.nvfp4_recipe``):
    NVFP4 blocks by Transformer Engine's arithmetic, its tiles, rounding, RHT and
    high-precision layers; bf16 outputs and weight gradients, an fp32 accumulator."""
    return Recipe(nr.name, fwd_fmt="nvfp4", bwd_fmt="nvfp4", scaling="block", out_fmt=nr.out_fmt,
                  wgrad_fmt="bf16", scale_convention="te", grad_rounding=nr.grad_rounding,
                  weight_block_2d=nr.weight_tile == (16, 16), wgrad_rht=nr.wgrad_rht,
                  keep_first=nr.keep_first, keep_last=nr.keep_last,
                  high_precision=nr.high_precision, description=nr.description)


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("fp32", description="fp32 operands, fp32 accumulator summed in K order (a CUDA-core SGEMM)"),
    Recipe("tf32", model="h100",
           description="fp32 tensors read as TF32 by the H100 tensor core (torch allow_tf32)"),
    Recipe("bf16", fwd_fmt="bf16", bwd_fmt="bf16", model="h100", out_fmt="bf16", wgrad_fmt="bf16",
           description="torch.autocast(bfloat16) on H100: bf16 operands and outputs, fp32 accumulation"),
    Recipe("fp16", fwd_fmt="fp16", bwd_fmt="fp16", model="h100", out_fmt="fp16", wgrad_fmt="fp16",
           loss_scaling=True,
           description="torch.autocast(float16) on H100 with a loss scaler (fp16 gradients underflow)"),
    Recipe("bf16_pure", fwd_fmt="bf16", bwd_fmt="bf16", model="h100", out_fmt="bf16",
           wgrad_fmt="bf16", policy="pure",
           description="a model cast to bfloat16 on H100: the bf16 GEMMs, and every other op's "
                       "output (activations, norms, softmax, residual sums) rounded to bf16"),
    Recipe("fp16_pure", fwd_fmt="fp16", bwd_fmt="fp16", model="h100", out_fmt="fp16",
           wgrad_fmt="fp16", loss_scaling=True, policy="pure",
           description="a model cast to float16 on H100 (every op's output rounded to fp16), "
                       "with a loss scaler"),
    Recipe("fp8_tensorwise", fwd_fmt="fp8_e4m3", bwd_fmt="fp8_e5m2", scaling="delayed", model="h100",
           out_fmt="bf16", wgrad_fmt="bf16", history_len=16,
           description="Transformer Engine HYBRID delayed scaling: E4M3 forward, E5M2 gradients, "
                       "per-tensor scales from a 16-step amax history, H100 FP8 tensor cores"),
    Recipe("fp8_unscaled", fwd_fmt="fp8_e4m3", bwd_fmt="fp8_e5m2", scaling="none", model="h100",
           out_fmt="bf16", wgrad_fmt="bf16",
           description="FP8 without scaling: values cast as they are (E4M3 overflows to NaN past "
                       "448, small E5M2 gradients flush to zero)"),
    Recipe("fp8_rowwise", fwd_fmt="fp8_e4m3", bwd_fmt="fp8_e4m3", scaling="tensor",
           granularity="rowwise", pow2_scale=True, scale_convention="torchao", model="h100",
           out_fmt="bf16", wgrad_fmt="bf16",
           description="torchao Float8LinearConfig.from_recipe_name('rowwise'): E4M3 everywhere, "
                       "one power-of-two scale per row along each GEMM's K (AXISWISE), "
                       "torchao's scale arithmetic, H100 FP8 tensor cores, rowwise epilogue"),
    Recipe("mxfp8", fwd_fmt="mxfp8_e4m3", bwd_fmt="mxfp8_e4m3", scaling="block", out_fmt="bf16",
           wgrad_fmt="bf16",
           description="OCP MXFP8 (E4M3 elements everywhere, as Transformer Engine's MXFP8 recipe), "
                       "blocks of 32 along each GEMM's K; fp32 accumulation of the dequantised products"),
    Recipe("mxfp4", fwd_fmt="mxfp4_e2m1", bwd_fmt="mxfp4_e2m1", scaling="block", out_fmt="bf16",
           wgrad_fmt="bf16",
           description="OCP MXFP4 forward and backward, round to nearest, blocks of 32 along K"),
    Recipe("nvfp4", fwd_fmt="nvfp4", bwd_fmt="nvfp4", scaling="block", out_fmt="bf16", wgrad_fmt="bf16",
           description="NVFP4 (E2M1, E4M3 scale per 16 along K, fp32 tensor scale), round to nearest"),
    *(from_nvfp4_recipe(nr) for nr in NVFP4_RECIPES.values()),  # branch nvfp4
    # branch b200: the block recipes on Blackwell's block-scaled unit (ff.block_scaled_matmul)
    Recipe("mxfp8_b200", fwd_fmt="mxfp8_e4m3", bwd_fmt="mxfp8_e4m3", scaling="block", model="b200",
           out_fmt="bf16", wgrad_fmt="bf16",
           description="MXFP8 (E4M3, blocks of 32 along each GEMM's K) on B200 tcgen05.mma "
                       "kind::mxf8f6f4: block scales applied inside the unit (ST-FDPA)"),
    Recipe("mxfp4_b200", fwd_fmt="mxfp4_e2m1", bwd_fmt="mxfp4_e2m1", scaling="block", model="b200",
           out_fmt="bf16", wgrad_fmt="bf16",
           description="MXFP4 forward and backward on B200 tcgen05.mma kind::mxf8f6f4 (ST-FDPA)"),
    Recipe("nvfp4_b200", fwd_fmt="nvfp4", bwd_fmt="nvfp4", scaling="block", model="b200",
           out_fmt="bf16", wgrad_fmt="bf16",
           description="NVFP4 on B200 tcgen05.mma kind::mxf4nvf4 (GST-FDPA); the fp32 tensor "
                       "scales in the epilogue's alpha"),
)}


def recipes() -> dict[str, Recipe]:
    """Every named recipe.

    >>> sorted(recipes())[:4]
    ['bf16', 'bf16_pure', 'fp16', 'fp16_pure']
    """
    return dict(RECIPES)


def get_recipe(recipe: str | Recipe) -> Recipe:
    """A ``Recipe`` from its name (or the recipe itself); unknown names list the valid ones."""
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, NVFP4Recipe):  # branch nvfp4
        return from_nvfp4_recipe(recipe)
    if not isinstance(recipe, str):
        raise TypeError(f"recipe must be a name or a Recipe, not {type(recipe).__name__}")
    key = recipe.strip().lower().replace("-", "_")
    if key not in RECIPES:
        raise unknown_name("recipe", recipe, RECIPES, note=" (or a Recipe)")
    return RECIPES[key]
