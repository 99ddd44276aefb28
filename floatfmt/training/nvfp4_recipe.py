"""NVIDIA's NVFP4 training recipe as data, and its forward GEMM.

"Pretraining Large Language Models with NVFP4" (NVIDIA, arXiv 2509.25149, section 4)
and Transformer Engine's ``NVFP4BlockScaling`` recipe
(``transformer_engine/common/recipe/__init__.py``) quantise every GEMM input of a
linear layer to NVFP4 (E2M1 elements, E4M3 block scales, an fp32 tensor scale) with:

* weights in 16 x 16 2-D blocks (``fp4_2d_quantization``): ``W`` and ``W.T`` quantise
  to the same values, so forward and backward see one weight;
* activations and gradients in 1 x 16 blocks along the GEMM's K;
* stochastic rounding of the gradients (``stochastic_rounding`` of ``fp4_quant_bwd_grad``);
* the random Hadamard transform, 16 x 16 with one fixed sign vector, on both inputs
  of the weight-gradient GEMM (``floatfmt.scaling.hadamard``);
* a few layers left in BF16 ("selective high-precision layers": the paper keeps
  about 16% of the linear layers of its 12B model, mostly in the last blocks, in
  BF16).  ``keep_first`` / ``keep_last`` count GEMM layers from either end; their
  defaults here (1 and 1: the first and the last layer) suit small models and are a
  choice, not the paper's count;
* TE's scale arithmetic (``floatfmt.scaling.nvfp4_te``).

``floatfmt.torch.emulate(model, "nvfp4_training")`` runs a model under it (the
``floatfmt.torch`` recipe of the same name reads its fields from here);
``ff.recipe_matmul(x, w, "nvfp4_training")`` computes one forward GEMM.

    >>> r = get_nvfp4_recipe("nvfp4_training")
    >>> r.weight_tile, r.act_tile, r.grad_rounding, r.wgrad_rht
    ((16, 16), (1, 16), 'stochastic', True)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.cast import cast
from ..core.names import unknown_name
from ..arith.ops import mul
from ..arith.matrixunit.tensorcore import block_scaled_mma, get_block_model
from ..scaling.hadamard import TE_WGRAD_SIGNS
from ..scaling.nvfp4_te import TE_TILES, nvfp4_te_quantize, te_gemm_alpha

__all__ = ["NVFP4Recipe", "NVFP4_RECIPES", "get_nvfp4_recipe", "nvfp4_recipe_matmul"]


@dataclass(frozen=True)
class NVFP4Recipe:
    """NVFP4 training, as data (the module docstring).

    Fields
    ------
    name : ``"nvfp4_training"``.
    weight_tile, act_tile, grad_tile : block shapes, ``(16, 16)`` or ``(1, 16)``.
    grad_rounding : ``"stochastic"`` or ``"nearest_even"`` for the output gradients.
    wgrad_rht : the random Hadamard transform on the weight-gradient GEMM's inputs.
    rht_signs : its sign vector (Transformer Engine's fixed one).
    keep_first, keep_last : GEMM layers at either end of a model left to ``high_precision``.
    high_precision : the recipe of those layers (``floatfmt.torch`` name, ``"bf16"``).
    model : the block-scaled matrix unit of ``recipe_matmul`` (``"b200"``).
    out_fmt : format of the GEMM outputs (``"bf16"``).
    description : free text (sources).
    """

    name: str = "nvfp4_training"
    weight_tile: tuple = (16, 16)
    act_tile: tuple = (1, 16)
    grad_tile: tuple = (1, 16)
    grad_rounding: str = "stochastic"
    wgrad_rht: bool = True
    rht_signs: tuple = TE_WGRAD_SIGNS
    keep_first: int = 1
    keep_last: int = 1
    high_precision: str = "bf16"
    model: str = "b200"
    out_fmt: str = "bf16"
    description: str = ""

    def __post_init__(self) -> None:
        for what in ("weight_tile", "act_tile", "grad_tile"):
            if tuple(getattr(self, what)) not in TE_TILES:
                raise ValueError(f"{what} must be one of {TE_TILES}, not {getattr(self, what)!r}")
        if self.act_tile != (1, 16) or self.grad_tile != (1, 16):
            raise ValueError("activations and gradients use 1 x 16 blocks (a 2-D tile of an "
                             "activation would not follow its rows)")
        if self.grad_rounding not in ("stochastic", "nearest_even"):
            raise unknown_name("grad_rounding", self.grad_rounding, ("stochastic", "nearest_even"))

    def replace(self, **changes: Any) -> "NVFP4Recipe":
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


NVFP4_RECIPES = {
    "nvfp4_training": NVFP4Recipe(
        description="NVIDIA NVFP4 pretraining (arXiv 2509.25149; Transformer Engine "
                    "NVFP4BlockScaling): 16x16 weight blocks, 1x16 activation and gradient "
                    "blocks, stochastic rounding of gradients, 16x16 RHT on Wgrad inputs, "
                    "TE's scale arithmetic, first and last GEMM layer in BF16"),
}


def get_nvfp4_recipe(recipe: str | NVFP4Recipe) -> NVFP4Recipe:
    """An ``NVFP4Recipe`` by name (or the recipe itself)."""
    if isinstance(recipe, NVFP4Recipe):
        return recipe
    if not isinstance(recipe, str):
        raise TypeError(f"recipe must be a name or an NVFP4Recipe, not {type(recipe).__name__}")
    key = recipe.strip().lower().replace("-", "_")
    if key not in NVFP4_RECIPES:
        raise unknown_name("NVFP4 recipe", recipe, NVFP4_RECIPES)
    return NVFP4_RECIPES[key]


def nvfp4_recipe_matmul(x: Any, w: Any, recipe: str | NVFP4Recipe = "nvfp4_training") -> np.ndarray:
    """The forward GEMM ``x @ w`` (M x K times K x N) of an NVFP4 training recipe: ``x`` in
    ``act_tile`` blocks along K, ``w`` in ``weight_tile`` blocks (both by Transformer
    Engine's arithmetic, ``nvfp4_te_quantize``, round to nearest even), the block-scaled
    products summed on ``model``'s unit (``ff.block_scaled_mma``), times TE's alpha
    ``te_gemm_alpha(amax_x, amax_w)`` in one fp32 multiply, rounded to ``out_fmt``.

    >>> x = np.ones((1, 32)); w = np.ones((32, 2))
    >>> nvfp4_recipe_matmul(x, w).tolist()
    [[32.0, 32.0]]
    """
    r = get_nvfp4_recipe(recipe)
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"nvfp4_recipe_matmul needs M x K and K x N arrays, not {x.shape} and {w.shape}")
    qx = nvfp4_te_quantize(x, -1, tile=r.act_tile)
    qw = nvfp4_te_quantize(w, 0, tile=r.weight_tile)
    m = get_block_model(r.model, "nvfp4")
    acc = block_scaled_mma(qx.elements, qx.scale, qw.elements, qw.scale, 0.0, m)
    amax_x = float(np.max(np.abs(x.astype(np.float32)))) if x.size else 0.0
    amax_w = float(np.max(np.abs(w.astype(np.float32)))) if w.size else 0.0
    y = mul(acc, te_gemm_alpha(amax_x, amax_w), "fp32")
    return np.asarray(cast(np.asarray(y, np.float64), r.out_fmt), np.float64)
