"""MX for training: each operand of the three training GEMMs blocked along the axis that
GEMM reduces over.

A linear layer ``Y = X W^T`` (X: M x K activations, W: N x K weights, dY: M x N) runs
three GEMMs per step, and each sums over a different axis:

=============  =====================  ==========================================
GEMM           product                blocks of 32 along (the reduction axis)
=============  =====================  ==========================================
forward        ``Y  = X  @ W^T``      X along K (axis 1), W along K (axis 1)
grad_input     ``dX = dY @ W``        dY along N (axis 1), W along N (axis 0)
grad_weight    ``dW = dY^T @ X``      dY along M (axis 0), X along M (axis 0)
=============  =====================  ==========================================

A block-scaled matrix unit applies one scale per block of the products it sums, so an
operand must be blocked along the reduction axis of the GEMM it enters: the MX copy of
W made for the forward pass (blocks along K) cannot serve the grad-input GEMM, which
sums over N (torchao issue 1501).  ``mx_gemm_operands`` quantises both operands of one
GEMM the right way; ``mx_gemm`` multiplies them, every product exact and the sum rounded
once to ``out_fmt``.

    >>> import numpy as np
    >>> dy, w = np.ones((2, 64)), np.ones((64, 3))
    >>> qa, qb = mx_gemm_operands("grad_input", dy, w)
    >>> qa.axis, qb.axis, qa.scale.shape, qb.scale.shape
    (1, 0, (2, 2), (2, 3))
    >>> mx_gemm("grad_input", dy, w).tolist()
    [[64.0, 64.0, 64.0], [64.0, 64.0, 64.0]]
"""

from __future__ import annotations

import numpy as np

from ..arith.accumulate import matmul
from ..scaling.quantize import quantize
from ..scaling.quantized_tensor import QuantizedTensor, choose

__all__ = ["GEMMS", "mx_gemm_operands", "mx_gemm"]

#: The three GEMMs of a training step, and the axis each operand is blocked along.
GEMMS = {"forward": (1, 1), "grad_input": (1, 0), "grad_weight": (0, 0)}


def mx_gemm_operands(gemm: str, a, b, fmt: str = "mxfp8_e4m3", b_fmt: str | None = None, *,
                     rounding: str = "nearest_even", scale_rounding: str = "floor",
                     rng=None) -> tuple[QuantizedTensor, QuantizedTensor]:
    """The two operands of one training GEMM quantised to MX along its reduction axis.

    ``gemm`` and the operands, as the GEMM names them (see the module table):
    ``"forward"``: ``a = X`` (M x K), ``b = W`` (N x K); ``"grad_input"``: ``a = dY``
    (M x N), ``b = W`` (N x K); ``"grad_weight"``: ``a = dY`` (M x N), ``b = X`` (M x K).
    ``fmt`` is the MX format of ``a`` (and of ``b`` unless ``b_fmt`` is given: E5M2
    gradients with E4M3 weights, say).  Returns the two ``QuantizedTensor``; their
    ``axis`` is the axis each was blocked along.
    """
    key = choose("gemm", gemm, tuple(GEMMS))
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"{key} needs 2-D operands, not shapes {a.shape} and {b.shape}")
    ax_a, ax_b = GEMMS[key]
    if a.shape[ax_a] != b.shape[ax_b]:
        raise ValueError(f"{key}: the reduction axes differ: {a.shape} axis {ax_a} and "
                         f"{b.shape} axis {ax_b}")
    opts = {"rounding": rounding, "scale_rounding": scale_rounding, "rng": rng}
    qa = quantize(a, fmt, axis=ax_a, **opts)
    qb = quantize(b, fmt if b_fmt is None else b_fmt, axis=ax_b, **opts)
    if qa.granularity != "block" or qb.granularity != "block" or qa.tensor_scale is not None:
        raise ValueError(f"mx_gemm_operands takes OCP MX formats (mxfp8_e4m3 ...), not {fmt!r}")
    return qa, qb


def mx_gemm(gemm: str, a, b, fmt: str = "mxfp8_e4m3", b_fmt: str | None = None, *,
            out_fmt: str = "fp32", rounding: str = "nearest_even",
            scale_rounding: str = "floor", rng=None) -> np.ndarray:
    """The result of one training GEMM from MX operands (``mx_gemm_operands``): the exact
    sum of the exact products of the dequantised operands, rounded once to ``out_fmt``
    (``forward``: M x N, ``grad_input``: M x K, ``grad_weight``: N x K).

    The dequantised MX values (element times a power of two) of fp32-range data are fp32
    values, so the products are exact; only the final rounding is inexact."""
    qa, qb = mx_gemm_operands(gemm, a, b, fmt, b_fmt, rounding=rounding,
                              scale_rounding=scale_rounding, rng=rng)
    A, B = qa.dequantize(), qb.dequantize()
    key = choose("gemm", gemm, tuple(GEMMS))
    if key == "forward":
        A, B = A, B.T
    elif key == "grad_weight":
        A = A.T
    return matmul(A, B, "fp32", acc_fmt=out_fmt, order="exact")
