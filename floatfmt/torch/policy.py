"""Op policies of ``emulate``: which ops a recipe runs in its low format, which stay fp32.

The lists follow ``torch.autocast``'s CUDA op lists (the PyTorch "Automatic Mixed
Precision" reference), by the name an op has as a torch function:

* ``GEMM_OPS``, autocast's lower-precision list as far as floatfmt models it:
  ``linear``, ``matmul`` / ``mm`` / ``bmm`` / ``addmm`` / ``baddbmm``, two-operand
  ``einsum``, ``scaled_dot_product_attention``, ``conv1d/2d/3d`` and
  ``conv_transpose1d/2d/3d`` (and ``multi_head_attention_forward``, made of them).
  Every policy computes these with the recipe: its operand formats, its matrix
  unit, its output formats.
* ``FP32_OPS``, autocast's float32 list: softmax, log_softmax, layer_norm,
  group_norm, norms, the losses, the reductions (sum, prod, cumsum, cumprod) and the
  transcendental functions autocast promotes (exp, log, pow, rsqrt, ...).
* ``ARITHMETIC_OPS``: the other arithmetic ops (elementwise sums and products,
  activations, batch_norm, dropout, mean, ...).

Policy ``"autocast"`` (every named recipe but the ``*_pure`` ones) leaves the fp32
list and the other arithmetic ops alone: they compute in float32 on the values the
GEMMs gave (under real autocast the elementwise ops after a GEMM compute in its
bf16 / fp16 dtype, so this is the optimistic side of autocast for activations; norms,
softmax and losses are exact to autocast).  Policy ``"pure"`` (``bf16_pure``,
``fp16_pure``) rounds the output of every op of both lists to the recipe's
``out_fmt`` (computed in float32, rounded once: what a bf16 kernel computing in fp32
registers stores), and the gradient arriving at its output in backward as well; it is
a model cast to bf16 / fp16.  Shape and copy ops (view, reshape, cat, ...) are never rounded:
their values are their inputs'.

>>> op_class("layer_norm"), op_class("gelu"), op_class("conv2d"), op_class("view")
('fp32', 'arithmetic', 'gemm', None)
"""

from __future__ import annotations

__all__ = ["GEMM_OPS", "FP32_OPS", "ARITHMETIC_OPS", "op_class", "rounds"]

GEMM_OPS = frozenset({
    "linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm", "einsum",
    "scaled_dot_product_attention", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "multi_head_attention_forward"})

FP32_OPS = frozenset({
    "softmax", "log_softmax", "softmin", "layer_norm", "group_norm", "rms_norm", "norm", "normalize",
    "renorm", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits", "poisson_nll_loss",
    "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss", "soft_margin_loss",
    "multilabel_margin_loss", "multi_margin_loss", "triplet_margin_loss", "cosine_similarity",
    "cdist", "pdist", "dist", "sum", "prod", "cumsum", "cumprod", "logsumexp", "exp", "expm1",
    "log", "log10", "log2", "log1p", "pow", "__pow__", "__rpow__", "reciprocal", "rsqrt",
    "acos", "asin", "cosh", "sinh", "tan", "erfinv", "softplus", "__rtruediv__", "__rdiv__"})

ARITHMETIC_OPS = frozenset({
    "add", "sub", "mul", "div", "true_divide", "neg", "__add__", "__radd__", "__sub__", "__rsub__",
    "__mul__", "__rmul__", "__truediv__", "__div__", "__neg__", "rsub", "addcmul", "addcdiv",
    "relu", "relu6", "gelu", "silu", "mish", "sigmoid", "tanh", "hardtanh", "hardswish",
    "hardsigmoid", "leaky_relu", "elu", "selu", "celu", "glu", "logsigmoid", "softsign",
    "tanhshrink", "threshold", "sqrt", "square", "abs", "sin", "cos", "erf", "mean", "var",
    "std", "batch_norm", "instance_norm", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "alpha_dropout", "lerp", "clamp", "clip", "maximum", "minimum", "where", "masked_fill",
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "interpolate", "embedding"})


def _base(name: str) -> str:
    """The out-of-place name of an op (``add_`` -> ``add``, ``__iadd__`` -> ``__add__``)."""
    if name.startswith("__i") and name.endswith("__"):
        return "__" + name[3:]
    if name.endswith("_") and not name.endswith("__"):
        return name[:-1]
    return name


def op_class(name: str) -> str | None:
    """``"gemm"``, ``"fp32"``, ``"arithmetic"`` or None (shape, copy and other ops) for
    an op's torch-function name (in-place forms take their op's class)."""
    b = _base(name)
    if b in GEMM_OPS:
        return "gemm"
    if b in FP32_OPS:
        return "fp32"
    if b in ARITHMETIC_OPS:
        return "arithmetic"
    return None


def rounds(policy: str, name: str) -> bool:
    """Whether ``policy`` rounds the output of the op ``name`` to the recipe's ``out_fmt``.

    >>> rounds("pure", "gelu"), rounds("pure", "softmax"), rounds("autocast", "gelu")
    (True, True, False)
    """
    return policy == "pure" and op_class(name) in ("fp32", "arithmetic")
