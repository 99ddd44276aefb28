"""Convolutions as the implicit GEMMs a tensor-core convolution computes (im2col).

A convolution of ``x`` (N, C, *S) with ``W`` (O, C/G, *k), stride ``s``, padding ``p``,
dilation ``d`` and ``G`` groups is, per group ``g``, the GEMM

    Y_g (N*L, O/G) = P_g (N*L, C/G * prod(k)) @ W_g^T (C/G * prod(k), O/G)

with ``P = im2col(pad(x, p))``: one row per output position (n, l), its columns
ordered (channel, k_1, ..., k_d) -- ``torch.nn.functional.unfold``'s order, so for 2-D
inputs ``P`` is ``F.unfold(x, k, d, p, s)`` transposed (tests/test_emulate_ops.py
checks it).  Backward: ``dW_g = dY_g^T @ P_g`` (reduces over N*L, the wgrad) and
``dx`` = the convolution of ``dY`` with zeros inserted between its elements
(stride - 1 of them), padded by ``d * (k - 1)``, with the flipped, channel-swapped
weights (the dgrad: one accumulation per input element over (o, k)).  A transposed
convolution is that dgrad applied to its input.  The functions here only move values
(gathers, zeros, flips): every product and sum is the GEMM's.
"""

from __future__ import annotations

from math import prod

import torch
import torch.nn.functional as F

__all__ = ["im2col", "pad", "stuff", "flip_weight", "conv_out_size"]


def conv_out_size(size: int, k: int, stride: int, dilation: int) -> int:
    """Output length of a convolution over an already padded axis of ``size``."""
    return (size - dilation * (k - 1) - 1) // stride + 1


def pad(x: torch.Tensor, before: list[int], after: list[int]) -> torch.Tensor:
    """``x`` (N, C, *S) with zeros added (negative: elements removed) on each spatial axis."""
    widths: list[int] = []
    for b, a in zip(reversed(before), reversed(after)):
        widths += [b, a]
    return F.pad(x, widths) if any(widths) else x


def stuff(x: torch.Tensor, stride: list[int]) -> torch.Tensor:
    """``x`` (N, C, *S) with ``stride - 1`` zeros between neighbours on each spatial axis."""
    if all(s == 1 for s in stride):
        return x
    shape = list(x.shape[:2]) + [(n - 1) * s + 1 for n, s in zip(x.shape[2:], stride)]
    out = x.new_zeros(shape)
    out[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)] = x
    return out


def im2col(x: torch.Tensor, kernel: list[int], stride: list[int], dilation: list[int],
           groups: int) -> tuple[torch.Tensor, list[int]]:
    """The implicit GEMM's left operand of a padded ``x`` (N, C, *S): (G, N*L, C/G*prod(k)),
    rows ordered (n, l_1, ..., l_d), columns (channel, k_1, ..., k_d); and the L_i."""
    n, c = x.shape[:2]
    d = len(kernel)
    cols = x
    for i in range(d):
        span = dilation[i] * (kernel[i] - 1) + 1
        cols = cols.unfold(2 + i, span, stride[i])
        if dilation[i] > 1:
            cols = cols[..., ::dilation[i]]
    sizes = list(cols.shape[2:2 + d])
    # (N, C, L..., k...) -> (N, L..., C, k...)
    cols = cols.permute(0, *range(2, 2 + d), 1, *range(2 + d, 2 + 2 * d))
    cols = cols.reshape(n * prod(sizes), groups, (c // groups) * prod(kernel))
    return cols.transpose(0, 1), sizes


def flip_weight(w: torch.Tensor, groups: int) -> torch.Tensor:
    """The dgrad's weights: (O, C/G, *k) -> (C, O/G, *k), each kernel flipped."""
    o, cg = w.shape[:2]
    k = w.shape[2:]
    w2 = w.reshape(groups, o // groups, cg, *k).transpose(1, 2).reshape(groups * cg, o // groups, *k)
    return w2.flip(list(range(2, 2 + len(k))))
