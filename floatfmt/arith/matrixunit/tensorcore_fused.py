"""The fused kernel of a tensor-core model's K chain (``chain_matmul_fused``), and the
setting that turns it on (``set_matmul_kernel``, ``matmul_kernel``).

The steps are those of ``tensorcore_fast`` (its docstring states them), written over
the array namespace as two functions per step of L products:

* ``emax_step``: the exponent sums e_a + e_b of the L products, their maximum, the
  floor ``zero_exponent`` and the accumulator's exponent: e_max, and 2**(F - e_max)
  built from exponent bits;
* ``sum_step``: every product times 2**(F - e_max) (exact), converted to an integer
  (C's conversion truncates toward zero: the alignment), the integers summed, the
  truncated accumulator added, the sum scaled back by 2**(e_max - F) and rounded
  toward zero to the step format by clearing its low bits.

On numpy arrays the two functions run as they are (the products of a step are stored:
small shapes only, as in the tests).  With ``set_matmul_kernel("compiled")`` the
numpy kernels' callers run them on torch CPU tensors through ``torch.compile``
(inductor's C++ backend: each function becomes one loop nest, so the L products of a
step are never stored); the tensors share the arrays' memory.  512^3 bf16 ``h100`` on
a 2-core machine: 29 ms against the numpy kernel's 160 ms (benchmarks/bench_matmul.py).

Where the fused form does not hold, nothing changes: ``fused_ok`` admits the cases of
``tensorcore_fast.fast_ok`` whose steps round toward zero to a float format, with c
entering ``"aligned"`` (or ``"after"`` into an fp32 accumulator: the products' sum, then
one float32 addition, which is IEEE's round to nearest-even of the exact sum) and
a finite accumulator that is not subnormal.  A result that may be subnormal or near
the step format's overflow threshold (an output whose exact sum lies outside
[smallest normal, 2**emax)) is noticed at the end of the chain, and the whole product
is then done again by ``tensorcore_fast``.  tests/test_tensorcore_fused.py proves the
numpy run and the compiled run equal to ``tensorcore_fast`` (itself proven equal to the
reference steps).

The compiled kernel needs torch (``pip install "floatfmt[torch]"``) and a C++ compiler
at run time (inductor's); ``import floatfmt`` needs neither.  The first call in a
process compiles (about 2-4 s; later processes reuse inductor's cache); shapes are
dynamic, so the kernels are reused across sizes.  If compiling fails, a warning says
why and the numpy kernel runs (the same bits).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import warnings
from collections.abc import Iterator

import numpy as np

from ...backend.dispatch import from_host
from ...backend.namespace import namespace
from ...core.formats import Format, get_format
from ...core.names import unknown_name
from ...core.optional import optional_import
from ...core.rounding import OBSERVER
from ...core.threads import get_num_threads

from .model import TensorCoreModel
from .tensorcore_fast import chain_matmul_fast, fast_ok, product_dtype

__all__ = ["MATMUL_KERNELS", "set_matmul_kernel", "get_matmul_kernel", "matmul_kernel",
           "fused_ok", "emax_step", "sum_step", "chain_matmul_fused"]

#: The kernels a matrix-unit product (``model=``) may run on: ``"numpy"`` (the default:
#: ``tensorcore_fast`` and the reference steps) and ``"compiled"`` (this module's fused
#: kernel through ``torch.compile`` where ``fused_ok`` admits the product, else numpy's).
#: Both give the same bits.
MATMUL_KERNELS = ("numpy", "compiled")

_ZERO_EXP = -16000  # the exponent of a zero input: its products never set e_max

_SETTING: list[str | None] = [None]  # set_matmul_kernel's choice (None: the environment's)
_LOCAL: contextvars.ContextVar[str | None] = contextvars.ContextVar("matmul_kernel", default=None)


def _check(name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"the matmul kernel is a name ({', '.join(MATMUL_KERNELS)}), "
                        f"not {type(name).__name__}")
    if name not in MATMUL_KERNELS:
        raise unknown_name("matmul kernel", name, list(MATMUL_KERNELS))
    if name == "compiled":
        optional_import("torch", "torch", 'the "compiled" matmul kernel')
    return name


def set_matmul_kernel(name: str) -> None:
    """Choose the kernel of every matrix-unit product (``ff.matmul(..., model=)``,
    ``ff.mma``, the recipes and ``emulate``) for the process: ``"numpy"`` (the default)
    or ``"compiled"`` (torch.compile of the fused steps; needs torch and a C++ compiler).
    The bits are the same; only the speed differs.  The environment variable
    ``FLOATFMT_MATMUL_KERNEL`` sets the default.

    >>> import floatfmt as ff
    >>> ff.get_matmul_kernel()
    'numpy'
    >>> ff.set_matmul_kernel("compile")
    Traceback (most recent call last):
    ...
    ValueError: unknown matmul kernel 'compile'. Did you mean 'compiled'? Valid: numpy, compiled.
    """
    _SETTING[0] = _check(name)


def get_matmul_kernel() -> str:
    """The matrix-unit kernel in force: the innermost ``matmul_kernel`` block, else
    ``set_matmul_kernel``'s choice, else ``FLOATFMT_MATMUL_KERNEL``, else ``"numpy"``."""
    local = _LOCAL.get()
    if local is not None:
        return local
    name = _SETTING[0]
    if name is None:
        name = _SETTING[0] = _check(os.environ.get("FLOATFMT_MATMUL_KERNEL", "numpy") or "numpy")
    return name


@contextlib.contextmanager
def matmul_kernel(name: str) -> Iterator[None]:
    """``with ff.matmul_kernel("compiled"):`` the products inside (this thread / task
    only) run on that kernel (see ``set_matmul_kernel``)."""
    token = _LOCAL.set(_check(name))
    try:
        yield
    finally:
        _LOCAL.reset(token)


# ---------------------------------------------------------------------------------------------
class _Plan:
    """The constants of one product's steps: product dtype, integer dtypes, bit masks."""

    def __init__(self, m: TensorCoreModel, in_fmt: Format, nl: int):
        self.m, self.F = m, m.F
        self.acc_fmt, self.ofmt = get_format(m.acc_fmt), m.output_format
        self.after = m.c_entry == "after"
        self.floor = m.zero_exponent
        self.mask = -(1 << (52 - self.ofmt.mbits))
        self.int32_sum = nl << (self.F + 2) <= 1 << 31  # nl terms below 2**(F + 2) each
        self.int32_term = self.F + 2 <= 31
        self.lo = self.ofmt.smallest_normal
        self.hi = 2.0 ** self.ofmt.emax


def fused_ok(x, y, m: TensorCoreModel, c) -> bool:
    """Whether ``chain_matmul_fused`` applies: ``fast_ok`` holds, the steps round toward
    zero to a float format of at most 52 fraction bits, c enters ``"aligned"`` (or
    ``"after"`` with fp32 as the step format), and c (None: +0) is finite and not
    subnormal in the accumulator format."""
    if not fast_ok(x, y, m) or OBSERVER.get() is not None:
        return False
    ofmt = m.output_format
    if m.rounding != "toward_zero" or ofmt.kind != "float" or ofmt.mbits > 52:
        return False
    if m.c_entry == "after":
        if (ofmt.emin, ofmt.mbits, ofmt.emax, ofmt.inf) != (-126, 23, 127, True):
            return False
    elif m.c_entry != "aligned":
        return False
    if c is None:
        return True
    a = np.abs(np.asarray(c, np.float64))
    return bool(np.isfinite(a).all()
                and not ((a < get_format(m.acc_fmt).smallest_normal) & (a != 0)).any())


def _exponents(v, fmt: Format, k_axis: int):
    """int32 exponents max(floor(log2|v|), emin) of the values (zeros: ``_ZERO_EXP``),
    the K axis first (contiguous)."""
    e = (v.view(np.int64) >> 52) & 0x7FF
    e = np.where(v != 0, np.maximum(e - 1023, fmt.emin), _ZERO_EXP).astype(np.int32)
    return np.ascontiguousarray(np.moveaxis(e, k_axis, 0))


def acc_exponent(acc, floor: int, xp):
    """The exponent of each accumulator value (normal or zero float64 values): its
    exponent field less 1023, ``floor`` for a zero (int32)."""
    b = acc.view(xp.dtype_of("int64"))
    e = ((b >> 52) & 0x7FF) - 1023
    return xp.astype(xp.where(acc != 0, e, floor), xp.dtype_of("int32"))


def emax_step(exK, eyK, ec, floor: int, F: int, wide: bool):
    """e_max of one step: the largest exponent sum of its products (exK (l, B, M) and
    eyK (l, B, N), int32), at least ``floor``, and the accumulator's exponent ``ec``
    (B, M, N); and 2**(F - e_max) from exponent bits, float32 (``wide``: float64;
    ``fused_ok`` keeps F - e_max within its normal range)."""
    xp = namespace(exK)
    e = exK[..., :, None] + eyK[..., None, :]
    E = xp.maximum(xp.clamp_min(xp.amax(e, 0), floor), ec)
    if wide:
        up = (xp.astype(F + 1023 - E, xp.dtype_of("int64")) << 52).view(xp.dtype_of("float64"))
    else:
        # a step without a nonzero term may have e_max below F - 126: its terms are 0
        # times any finite number, so 2**(F - e_max) is clamped to float32's normal range
        up = (xp.clip(F + 127 - E, 1, 254) << 23).view(xp.dtype_of("float32"))
    return E, up


# size: one step of the rule (align, sum, add c, scale back, round, check), written once
def sum_step(xK, yK, up, E, acc, F: int, mask: int, int32_term: bool, int32_sum: bool,
             after: bool, floor: int, lo: float, hi: float):
    """One step's sum: the products of xK (l, B, M) and yK (l, B, N) times ``up`` =
    2**(F - e_max) (exact), truncated toward zero to integers (the conversion), summed
    exactly (int32 where the terms allow, else int64); plus the accumulator truncated to
    a multiple of 2**(e_max - F) (``"aligned"``); times 2**(e_max - F), rounded toward zero
    to the step format by clearing the low bits of the float64 (``mask``).  With
    ``after``: the rounded sum of the products plus c by one float32 addition.  Returns
    (new accumulator, its exponents, whether an output's exact sum lay outside
    [lo, hi) (then the caller redoes the product: subnormal or overflowing results))."""
    xp = namespace(xK)
    i64, f64 = xp.dtype_of("int64"), xp.dtype_of("float64")
    p = xK[..., :, None] * yK[..., None, :] * up
    j = xp.astype(p, xp.dtype_of("int32" if int32_term else "int64"))
    s = xp.astype(j.sum(0, dtype=xp.dtype_of("int32" if int32_sum else "int64")), f64)
    E64 = xp.astype(E, i64)
    down = ((E64 + (1023 - F)) << 52).view(f64)
    if not after:
        s = s + xp.trunc(acc * ((F + 1023 - E64) << 52).view(f64))  # an exact zero is +0
    val = s * down
    a = xp.abs(val)
    risky = ((a >= hi) | ((a < lo) & (val != 0))).any()
    r = (val.view(i64) & mask).view(f64)
    if after:
        f32 = xp.dtype_of("float32")
        r = xp.astype(xp.astype(r, f32) + xp.astype(acc, f32), f64)
        a = xp.abs(r)
        risky = risky | ((a >= hi) | ((a < lo) & (r != 0))).any()
    return r, acc_exponent(r, floor, xp), risky


# ---------------------------------------------------------------------------------------------
_COMPILED: dict = {}
_FAILED: list[str] = []


def _compiled(fn):
    """``fn`` through torch.compile (dynamic shapes, one graph), made once."""
    f = _COMPILED.get(fn)
    if f is None:
        torch = optional_import("torch", "torch", 'the "compiled" matmul kernel')
        f = _COMPILED[fn] = torch.compile(fn, dynamic=True, fullgraph=True)
    return f


def use_compiled(x, y, m: TensorCoreModel, c) -> bool:
    """Whether a product runs on the compiled fused kernel: ``get_matmul_kernel()`` is
    ``"compiled"``, compiling has not failed in this process, and ``fused_ok``."""
    return get_matmul_kernel() == "compiled" and not _FAILED and fused_ok(x, y, m, c)


def chain_matmul_fused(x, y, in_fmt: Format, m: TensorCoreModel, c, out_shape,
                       compiled: bool = True):
    """``tensorcore_fast.chain_matmul_fast`` by the fused steps (see the module
    docstring; ``fused_ok`` must hold): numpy arrays in, float64 array out.
    ``compiled``: run the steps on torch CPU tensors through torch.compile (else on the
    numpy arrays themselves, storing each step's products)."""
    if out_shape[-1] < out_shape[-2]:  # vectorise along the longer axis (the model is symmetric)
        ct = None if c is None else np.swapaxes(np.broadcast_to(c, out_shape), -1, -2)
        tshape = out_shape[:-2] + (out_shape[-1], out_shape[-2])
        return np.swapaxes(chain_matmul_fused(np.swapaxes(y, -1, -2), np.swapaxes(x, -1, -2),
                                              in_fmt, m, ct, tshape, compiled), -1, -2)
    batch, rows, cols = out_shape[:-2], out_shape[-2], out_shape[-1]
    nb = int(np.prod(batch, dtype=np.int64))
    x = _batched(x, batch, nb)  # (Bx, M, K), Bx in (1, nb)
    y = _batched(y, batch, nb)  # (By, K, N)
    K, L = x.shape[-1], m.L
    pdt = product_dtype(x, y, in_fmt, m.F)
    xK = np.ascontiguousarray(np.moveaxis(x, -1, 0), pdt)  # (K, Bx, M)
    yK = np.ascontiguousarray(np.moveaxis(y, -2, 0), pdt)  # (K, By, N)
    exK, eyK = _exponents(x, in_fmt, -1), _exponents(y, in_fmt, -2)
    plan = _Plan(m, in_fmt, max(1, min(L, K)))
    acc = np.zeros((nb, rows, cols)) if c is None else \
        np.array(np.broadcast_to(c, out_shape), np.float64).reshape(nb, rows, cols)
    ec0 = acc_exponent(acc * (not plan.after), plan.floor, namespace(acc))
    args = [xK, yK, exK, eyK, acc, ec0]
    steps = (emax_step, sum_step)
    if compiled:
        args = [from_host(a, "cpu") for a in args]
        try:
            steps = tuple(_compiled(f) for f in steps)
            r = _chain(args, steps, plan, pdt is np.float64, K, L)
        except Exception as err:  # noqa: BLE001 (inductor raises many kinds; the fallback is exact)
            _FAILED.append(f"{type(err).__name__}: {err}")
            warnings.warn("the compiled matmul kernel failed (" + _FAILED[0][:300] + "); "
                          "the numpy kernel runs instead (the same bits)", RuntimeWarning,
                          stacklevel=3)
            r = None
        if r is not None and r is not False:
            r = r.numpy()
    else:
        r = _chain(args, steps, plan, pdt is np.float64, K, L)
    if r is False or r is None:  # a subnormal or overflowing result: the numpy kernel
        return chain_matmul_fast(x, y, in_fmt, m, None if c is None else
                                 np.broadcast_to(c, out_shape).reshape(acc.shape),
                                 (nb, rows, cols)).reshape(out_shape)
    return r.reshape(out_shape)


def _chain(args: list, steps: tuple, plan: _Plan, wide: bool, K: int, L: int):
    """The K chain of the steps on args = (xK, yK, exK, eyK, acc, ec); False where an
    output left the plain range."""
    xK, yK, exK, eyK, acc, ec = args
    emax, add = steps
    xp = namespace(acc)
    flag = None
    with xp.threads(get_num_threads()), np.errstate(under="ignore", over="ignore"):
        for k0 in range(0, K, L):
            k1 = min(K, k0 + L)
            E, up = emax(exK[k0:k1], eyK[k0:k1], ec, plan.floor, plan.F, wide)
            acc, e, risky = add(xK[k0:k1], yK[k0:k1], up, E, acc, plan.F, plan.mask,
                                plan.int32_term, plan.int32_sum, plan.after, plan.floor,
                                plan.lo, plan.hi)
            if not plan.after:  # c after: it never sets e_max (ec stays the floor)
                ec = e
            flag = risky if flag is None else flag | risky
    if flag is not None and bool(flag):
        return False
    return acc


def _batched(v, batch: tuple, nb: int):
    """v (..., R, C) as (1 or nb, R, C): leading axes broadcast to ``batch`` and flattened
    (an operand without batch axes, or with only ones, stays one matrix)."""
    lead = v.shape[:-2]
    if int(np.prod(lead, dtype=np.int64)) == 1:
        return v.reshape((1,) + v.shape[-2:])
    return np.broadcast_to(v, batch + v.shape[-2:]).reshape((nb,) + v.shape[-2:])
