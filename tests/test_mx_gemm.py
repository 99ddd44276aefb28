"""MX for the three training GEMMs (issue 15, "MX for training"): each operand blocked
along the axis its GEMM reduces over, checked against an exact reference, and shown to
differ from one-axis MX (every tensor blocked once along its last axis and reused).

Reference: every block is found from element indices along the GEMM's reduction axis,
quantised by ``ref_mx_block`` (tests/test_mx.py: the OCP MX v1.0 rule in Fraction
arithmetic, elements rounded over ml_dtypes' value tables), and each output is the exact
Fraction sum of the products, rounded once to fp32 by ``fp32_rne``
(tests/oracles/block_scaling.py).  Nothing of floatfmt computes the reference.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from floatfmt.training.mx_gemms import GEMMS, mx_gemm, mx_gemm_operands
from tests.oracles.block_scaling import fp32_rne
from tests.test_mx import ref_mx_block

M, N, K = 6, 40, 70  # reduction axes of 40 and 70: partial last blocks too


def ref_mx(a, axis, name):
    """Dequantised MX values of a 2-D array, blocks of 32 along ``axis`` by index."""
    a = np.asarray(a, np.float64)
    out = np.empty(a.shape, object)
    lines = a if axis == 1 else a.T
    for i, line in enumerate(lines):
        vals = []
        for j in range(0, len(line), 32):
            vals += ref_mx_block(line[j:j + 32], name)[1]
        for j, v in enumerate(vals):
            out[(i, j) if axis == 1 else (j, i)] = Fraction(v)
    return out


def ref_product(A, B):
    """Exact A @ B of Fraction matrices, each output rounded once to fp32."""
    return np.array([[float(fp32_rne(sum((A[i, k] * B[k, j] for k in range(A.shape[1])),
                                         Fraction(0))))
                      for j in range(B.shape[1])] for i in range(A.shape[0])])


def operands(seed):
    """X (M x K), W (N x K), dY (M x N) whose rows and columns differ in size by powers of
    two up to 2**12, so the block scales depend on which axis the blocks run along."""
    rng = np.random.default_rng(seed)
    row = lambda n: 2.0 ** rng.integers(-6, 7, n)  # noqa: E731
    X = (rng.standard_normal((M, K)) * row(M)[:, None] * row(K)[None, :]).astype(np.float32)
    W = (rng.standard_normal((N, K)) * row(N)[:, None] * row(K)[None, :]).astype(np.float32)
    dY = (rng.standard_normal((M, N)) * row(M)[:, None] * row(N)[None, :]).astype(np.float32)
    return X, W, dY


CASES = {  # gemm: (a, b, exact operands for A @ B from MX copies blocked along the reduction axis)
    "forward": lambda X, W, dY, f: (X, W, ref_mx(X, 1, f), ref_mx(W, 1, f).T),
    "grad_input": lambda X, W, dY, f: (dY, W, ref_mx(dY, 1, f), ref_mx(W, 0, f)),
    "grad_weight": lambda X, W, dY, f: (dY, X, ref_mx(dY, 0, f).T, ref_mx(X, 0, f)),
}


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4_e2m1", "mxint8"])
@pytest.mark.parametrize("gemm", list(GEMMS))
def test_each_gemm_equals_the_exact_reference(gemm, fmt):
    X, W, dY = operands(1)
    a, b, A, B = CASES[gemm](X, W, dY, fmt)
    got = mx_gemm(gemm, a, b, fmt)
    want = ref_product(A, B)
    assert got.shape == want.shape
    assert int(np.sum(got != want)) == 0


def one_axis(a, fmt):
    """One-axis MX: the tensor blocked once along its last axis (as the forward GEMM
    needs for X and W), reused by every GEMM."""
    return ref_mx(a, 1, fmt)


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4_e2m1"])
def test_backward_gemms_differ_from_one_axis_mx(fmt):
    X, W, dY = operands(2)
    right = {g: mx_gemm(g, *CASES[g](X, W, dY, fmt)[:2], fmt) for g in GEMMS}
    wrong = {"forward": ref_product(one_axis(X, fmt), one_axis(W, fmt).T),
             "grad_input": ref_product(one_axis(dY, fmt), one_axis(W, fmt)),
             "grad_weight": ref_product(one_axis(dY, fmt).T, one_axis(X, fmt))}
    # the forward GEMM reduces over K, the last axis of X and W: one-axis MX is right there
    assert np.array_equal(right["forward"], wrong["forward"])
    # the backward GEMMs reduce over N and M: W, dY and X blocked along K / N give
    # other scales and so other products (most outputs change)
    for g in ("grad_input", "grad_weight"):
        diff = int(np.sum(right[g] != wrong[g]))
        assert diff > right[g].size // 4, (g, diff, right[g].size)


def test_operands_are_blocked_along_the_reduction_axis():
    X, W, dY = operands(3)
    for gemm, (ax_a, ax_b) in GEMMS.items():
        a, b = CASES[gemm](X, W, dY, "mxfp8_e4m3")[:2]
        qa, qb = mx_gemm_operands(gemm, a, b)
        assert (qa.axis, qb.axis) == (ax_a, ax_b)
        assert qa.shape[ax_a] == qb.shape[ax_b]  # the same reduction length
        assert qa.scale.shape[ax_a] == -(-a.shape[ax_a] // 32)


def test_bad_input():
    X, W, dY = operands(4)
    with pytest.raises(ValueError, match="unknown gemm 'backward'.*forward, grad_input, grad_weight"):
        mx_gemm("backward", X, W)
    with pytest.raises(ValueError, match="reduction axes differ"):
        mx_gemm("grad_input", dY, X)  # dY sums over N = 40, X has M = 6 rows
    with pytest.raises(ValueError, match="OCP MX formats"):
        mx_gemm("forward", X, W, "nvfp4")
    with pytest.raises(ValueError, match="2-D"):
        mx_gemm("forward", X[0], W)
