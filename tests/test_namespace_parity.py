"""The numpy and torch namespaces agree method by method: the rules written once over
``xp`` get the same values from both (every method both define with the same name, on
arrays with negative and positive axes, empty and 0-d shapes where they apply)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from floatfmt.backend.namespace import NUMPY, namespace  # noqa: E402

T = namespace(torch.zeros(1))
A = np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 7.5


def same(a, b):
    a = a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape and np.array_equal(a, b), (a, b)


def test_both_namespaces_define_the_same_methods():
    names = lambda ns: {n for n in dir(ns) if not n.startswith("_")}  # noqa: E731
    missing = names(NUMPY) ^ names(T)
    # torch-only plumbing (its module, tensor intake details) and numpy-only constants
    allowed = {"t", "const_cache", "pow2_normal", "straight_through", "code_dtype", "int64"}
    assert not (missing - allowed), sorted(missing - allowed)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_axis_methods(axis):
    t = torch.from_numpy(A.copy())
    same(NUMPY.narrow(A, axis, 1), T.narrow(t, axis, 1))
    same(NUMPY.repeat(A, 2, axis), T.repeat(t, 2, axis))
    same(NUMPY.amax(A, axis), T.amax(t, axis))
    same(NUMPY.concatenate([A, A], axis), T.concatenate([t, t], axis))
    same(NUMPY.stack([A, A], axis), T.stack([t, t], axis))
    same(NUMPY.moveaxis(A, axis, 0), T.moveaxis(t, axis, 0))
    same(NUMPY.swapaxes(A, axis, -1), T.swapaxes(t, axis, -1))


def test_construction_and_conversion():
    t = torch.from_numpy(A.copy())
    same(NUMPY.zeros((2, 3), A), T.zeros((2, 3), t))
    same(NUMPY.zeros(4, A), T.zeros(4, t))
    i8 = np.ones(3, np.int8)
    assert NUMPY.zeros_as((2,), i8).dtype == np.int8
    assert T.zeros_as((2,), torch.from_numpy(i8)).dtype == torch.int8
    same(NUMPY.toint(A), T.toint(t))
    same(NUMPY.asfloat(2.5, A), T.asfloat(2.5, t))
    same(NUMPY.asfloat([1, 2], A), T.asfloat([1, 2], t))
    m, e = NUMPY.frexp(A)
    mt, et = T.frexp(t)
    same(m, mt)
    same(e, et)
    assert e.dtype == np.int64 and et.dtype == torch.int64
    same(NUMPY.amax(A), T.amax(t))
    same(NUMPY.broadcast_shapes((2, 1), (1, 3)), T.broadcast_shapes((2, 1), (1, 3)))
