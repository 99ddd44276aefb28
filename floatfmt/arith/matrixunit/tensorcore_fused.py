"""The fused kernel of a tensor-core model's K chain (``chain_matmul_fused``), and the
setting that turns it on (``set_matmul_kernel``, ``matmul_kernel``).

The steps are those of ``tensorcore_fast`` (its docstring states them), written over
the array namespace as three functions:

* ``operand_exponents``: every operand's exponent max(floor(log2|v|), emin), read from
  its bits, once per product (a zero's far below every other);
* ``block_emax``: for a group of steps at once, the largest exponent sum e_a + e_b
  of each step's L products, at least the floor ``zero_exponent``;
* ``sum_step``: one step: every product times 2**(F - e_max) (exact), converted to an
  integer (C's conversion truncates toward zero: the alignment), the integers summed,
  the truncated accumulator added, the sum divided by 2**(F - e_max) and rounded toward
  zero to the step format by clearing its low bits; and the next step's 2**(F - e_max)
  (``step_scale``: the accumulator's exponent against the next products').

On numpy arrays the functions run as they are (a step's products are stored: small
shapes only, as in the tests).  With ``set_matmul_kernel("compiled")`` the callers of
the numpy kernels run them on torch CPU tensors through ``torch.compile`` (inductor's
C++ backend: a step is one compiled call, and the L products of a step are never
stored); the tensors share the arrays' memory, the accumulator is kept in float32 (every
step format admitted is a subset of it).  512^3 bf16 ``h100`` on a 2-core Xeon: 41-44 ms
against the numpy kernel's 155-164 ms (benchmarks/bench_matmul.py).

Where the fused form does not hold, nothing changes: ``fused_ok`` admits the cases of
``tensorcore_fast.fast_ok`` whose steps round toward zero to a format float32 holds,
with c entering ``"aligned"`` (or ``"after"`` into an fp32 accumulator: the products'
sum, then one float32 addition, which is IEEE's round to nearest-even of the exact sum)
and a finite accumulator that is not subnormal.  An output that may become subnormal or
overflow (e_max past the bounds where clearing bits is the whole rounding) is set to
NaN, which the later steps keep; a NaN at the end means the whole product is done again
by ``tensorcore_fast``.  tests/test_tensorcore_fused.py proves the numpy run equal to
the slow independent model and the compiled run equal to ``tensorcore_fast`` (itself
proven equal to the reference steps).

The compiled kernel needs torch (``pip install "floatfmt[torch]"``) and a C++ compiler
at run time (inductor's); ``import floatfmt`` needs neither.  It runs on torch's threads
(``torch.set_num_threads``; changing them per call would cost milliseconds), the numpy
kernel on floatfmt's.  The first call in a process compiles (about 2-4 s when
inductor's cache has the kernels, about 30 s for all the variants the tests use on a
fresh machine); shapes are dynamic, so the kernels serve every size.  If compiling
fails, a warning says why and the numpy kernel runs from then on (the same bits).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import types
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...backend.dispatch import from_host
from ...backend.namespace import namespace
from ...core.formats import Format, get_format
from ...core.names import unknown_name
from ...core.optional import optional_import

from .model import TensorCoreModel
from .tensorcore_fast import chain_matmul_fast, fast_ok, product_dtype

__all__ = ["MATMUL_KERNELS", "MIN_PRODUCTS", "set_matmul_kernel", "get_matmul_kernel", "matmul_kernel",
           "fused_ok", "operand_exponents", "block_emax", "step_scale", "sum_step", "use_compiled",
           "chain_matmul_fused"]

#: The kernels a matrix-unit product (``model=``) may run on: ``"numpy"`` (the default:
#: ``tensorcore_fast`` and the reference steps) and ``"compiled"`` (this module's fused
#: kernel through ``torch.compile`` where ``fused_ok`` admits the product, else numpy's).
#: Both give the same bits.  (Products smaller than ``MIN_PRODUCTS`` stay on numpy's.)
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
    or ``"compiled"`` (torch.compile of the fused steps, ``tensorcore_fused``, for
    products of at least ``MIN_PRODUCTS`` = 2**20 multiply-adds; needs torch and a C++
    compiler; runs on torch's threads; the first call compiles).  The bits are the same;
    only the speed differs.  The environment variable
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
    """The constants of one product's steps (``chain_matmul_fused``)."""

    def __init__(self, m: TensorCoreModel, in_fmt: Format, nl: int, wide: bool):
        ofmt = m.output_format
        self.F, self.floor, self.emin, self.wide = m.F, m.zero_exponent, in_fmt.emin, wide
        self.after = m.c_entry == "after"
        self.mask = -(1 << (52 - ofmt.mbits))  # toward zero to ofmt: clear these bits
        self.int32_term = self.F + 2 <= 31  # one term is below 2**(F + 2)
        self.int32_sum = nl << (self.F + 2) <= 1 << 31  # and nl of them
        # |val| < (nl + 1) 2**(e_max + 2) < 2**(ofmt.emax + 1) for e_max <= top, and a
        # nonzero val (a multiple of 2**(e_max - F)) is normal in ofmt for e_max >= tiny
        top = ofmt.emax - 1 - (nl + 1).bit_length()
        tiny = ofmt.emin + self.F
        self.up_top, self.up_tiny = 2.0 ** (self.F - top), 2.0 ** (self.F - tiny)
        self.lo, self.hi = ofmt.smallest_normal, 2.0 ** ofmt.emax

    def consts(self) -> tuple:
        """The arguments of ``sum_step`` after the tensors."""
        return (self.F, self.floor, self.wide, self.after, self.mask, self.int32_term,
                self.int32_sum, self.up_top, self.up_tiny, self.lo, self.hi)


def fused_ok(x, y, m: TensorCoreModel, c) -> bool:
    """Whether ``chain_matmul_fused`` applies: ``fast_ok`` holds, the steps round toward
    zero to a float format that float32 holds (as is the accumulator's), c enters ``"aligned"`` (or
    ``"after"`` with fp32 as the step format), and c (None: +0) is finite and not
    subnormal in the accumulator format."""
    if not fast_ok(x, y, m):  # (it also steps aside for an ``ff.flags()`` block)
        return False
    ofmt = m.output_format
    for f in (ofmt, get_format(m.acc_fmt)):  # step values and c are held in float32
        if f.kind != "float" or f.mbits > 23 or f.emax > 127 or f.emin < -126:
            return False
    if m.rounding != "toward_zero":
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


def _exponents(v, emin: int, xp):
    """max(floor(log2|v|), emin) of normal or zero float32 / float64 values, read from
    their exponent bits (int32); ``_ZERO_EXP`` for zeros."""
    i32 = xp.dtype_of("int32")
    if v.dtype == xp.dtype_of("float32"):
        e = ((v.view(i32) >> 23) & 0xFF) - 127
    else:
        e = xp.astype(((v.view(xp.dtype_of("int64")) >> 52) & 0x7FF) - 1023, i32)
    return xp.where(v != 0, xp.clamp_min(e, emin), _ZERO_EXP)


def operand_exponents(xK, yK, emin: int):
    """The exponents of both operands (``_exponents``: int32, zeros far below the rest)."""
    xp = namespace(xK)
    return _exponents(xK, emin, xp), _exponents(yK, emin, xp)


def block_emax(exK, eyK, k0: int, g: int, l: int, floor: int):
    """The largest exponent sum e_a + e_b of the products of each of g steps of l
    products from ``k0`` on, at least ``floor``: exK (K, B, M) and eyK (K, B, N) the
    operands' exponents (``operand_exponents``); (g, B, M, N) int32.  A zero operand's
    exponent lies far below every other, so products with a zero never set it.  (Whole
    tensors and offsets, not slices, go in: compiled, views would multiply its guards.)"""
    xp = namespace(exK)
    ex = exK[k0:k0 + g * l].reshape((g, l) + tuple(exK.shape[1:]))
    ey = eyK[k0:k0 + g * l].reshape((g, l) + tuple(eyK.shape[1:]))
    e = ex[..., :, None] + ey[..., None, :]
    return xp.clamp_min(xp.amax(e, 1), floor)


def step_scale(Ep, acc, floor: int, F: int, wide: bool, after: bool):
    """2**(F - e_max) of a step, built from exponent bits: e_max from its products' ``Ep``
    (``block_emax``) and the accumulator ``acc`` (float32 holding normal or zero values;
    its exponent is read from bits; not with ``after``, where c does not take part);
    float32, or float64 with ``wide``.  In float32 the power is clamped to the normal
    range: only a step without a nonzero product can pass it (``product_dtype`` keeps
    F - e_max within [-126, 127] for every e_max a nonzero product sets), and
    ``sum_step`` flags it where c is nonzero."""
    xp = namespace(Ep)
    i32, i64 = xp.dtype_of("int32"), xp.dtype_of("int64")
    E = Ep
    if not after:
        ea = ((acc.view(i32) >> 23) & 0xFF) - 127
        E = xp.maximum(E, xp.where(acc != 0, ea, floor))
    if wide:
        return (xp.astype(F + 1023 - E, i64) << 52).view(xp.dtype_of("float64"))
    return (xp.clip(F + 127 - E, 1, 254) << 23).view(xp.dtype_of("float32"))


# size: one step of the rule (align, sum, add c, scale back, round, check) and the next
# step's scale, written once
def sum_step(xK, yK, k0: int, l: int, up, acc, Eg, i: int, F: int, floor: int,
             wide: bool, after: bool, mask: int, int32_term: bool, int32_sum: bool,
             up_top: float, up_tiny: float, lo: float, hi: float):
    """One step: the products of xK[k0:k0 + l] (l, B, M) and yK[k0:k0 + l] (l, B, N)
    times ``up`` = 2**(F - e_max) (exact), truncated toward zero to integers (the
    conversion), summed exactly (int32 where the terms allow, else int64); plus the
    accumulator (float32 values) truncated to a multiple of 2**(e_max - F) (c
    ``"aligned"``); divided by ``up`` and rounded toward zero to the step format by
    clearing the float64's low bits (``mask``).  With ``after``: that rounded sum plus c
    by one float32 addition.  Returns the new accumulator (float32) and the next step's
    scale from its products' e_max ``Eg[i]`` (``block_emax``, ``step_scale``).

    An output that may leave the plain range becomes NaN, and stays NaN through the
    later steps (inputs and c are finite, so no other NaN arises): e_max above the plan's
    ``top`` (``up < up_top``), or below its ``tiny`` (``up > up_tiny``: then a float32
    ``up`` may be clamped, and a result subnormal) with a nonzero term, or, after, a sum
    with c outside [lo, hi).  The caller redoes a product with a NaN output.  (A flag
    per output, not a reduction, lets the compiled step stay one loop.)"""
    xp = namespace(xK)
    f32, f64 = xp.dtype_of("float32"), xp.dtype_of("float64")
    jt, st = xp.dtype_of("int32" if int32_term else "int64"), \
        xp.dtype_of("int32" if int32_sum else "int64")
    p = xK[k0:k0 + l, ..., :, None] * yK[k0:k0 + l, ..., None, :] * up
    js = xp.astype(p, jt).sum(0, dtype=st)
    S = xp.astype(js, f64)
    u = xp.astype(up, f64)  # exact: a power of two, never clamped where no NaN is set
    nonzero = js != 0
    if not after:
        S = S + xp.trunc(xp.astype(acc, f64) * u)  # an exact zero is +0
        nonzero = nonzero | (acc != 0)
    val = S / u  # exact (dividing by a power of two, no underflow where no NaN is set)
    r = xp.astype((val.view(xp.dtype_of("int64")) & mask).view(f64), f32)  # exact
    risky = (up < up_top) | ((up > up_tiny) & nonzero)
    if after:
        r = r + acc  # float32's addition: the exact sum rounded to nearest-even
        a = xp.abs(r)
        risky = risky | (a >= hi) | ((a < lo) & (r != 0))
    r = xp.where(risky, float("nan"), r)
    return r, step_scale(Eg[i], r, floor, F, wide, after)


# ---------------------------------------------------------------------------------------------
_COMPILED: dict = {}
_FAILED: list[str] = []


def _compiled(fn, key: tuple):
    """``fn`` through torch.compile (dynamic shapes, one graph), made once per ``key``
    (the constants of a plan): each key gets its own copy of the code object, so that
    dynamo's recompile limit (8 per code object) counts only the shapes of one plan."""
    f = _COMPILED.get((fn, key))
    if f is None:
        torch = optional_import("torch", "torch", 'the "compiled" matmul kernel')
        name = f"{fn.__name__}_{len(_COMPILED)}"
        code = fn.__code__.replace(co_name=name, co_qualname=name)
        g = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
        f = _COMPILED[(fn, key)] = torch.compile(g, dynamic=True, fullgraph=True)
    return f


def _retire(key: tuple) -> None:
    """Forget the compiled copies of one plan: the next call makes new code objects, whose
    recompile counts start at zero (dynamo's limit is per code object)."""
    for k in [k for k in _COMPILED if k[1] == key]:
        del _COMPILED[k]


#: Products (multiply-adds) below which the compiled kernel leaves a product to numpy's:
#: a compiled call costs about 50 us, so small products run faster there (the same bits).
#: Measured on the 2-core Xeon (benchmarks/bench_emulate.py): models whose GEMMs are all
#: 32 x 32 x 32-sized took 1.6-1.8x longer on the compiled kernel.
MIN_PRODUCTS = 1 << 20


def use_compiled(x, y, m: TensorCoreModel, c) -> bool:
    """Whether a product runs on the compiled fused kernel: ``get_matmul_kernel()`` is
    ``"compiled"``, compiling has not failed in this process, the product has at least
    ``MIN_PRODUCTS`` multiply-adds, and ``fused_ok``."""
    if get_matmul_kernel() != "compiled" or _FAILED:
        return False
    n = np.prod(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]), dtype=np.int64) * \
        x.shape[-2] * x.shape[-1] * y.shape[-1]
    return bool(n >= MIN_PRODUCTS) and fused_ok(x, y, m, c)


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
    K = x.shape[-1]
    pdt = product_dtype(x, y, in_fmt, m.F)
    xK = np.ascontiguousarray(np.moveaxis(x, -1, 0), pdt)  # (K, Bx, M)
    yK = np.ascontiguousarray(np.moveaxis(y, -2, 0), pdt)  # (K, By, N)
    plan = _Plan(m, in_fmt, max(1, min(m.L, K)), pdt is np.float64)
    acc = np.zeros((nb, rows, cols), np.float32) if c is None else \
        np.array(np.broadcast_to(c, out_shape), np.float32).reshape(nb, rows, cols)  # exact
    if K == 0 or acc.size == 0:  # no products, or no outputs
        return acc.astype(np.float64).reshape(out_shape)
    fns: tuple = (operand_exponents, block_emax, sum_step)
    r: Any = False
    if compiled:
        key = plan.consts() + (str(pdt),)
        tx, ty, tacc = (from_host(v, "cpu") for v in (xK, yK, acc))
        for attempt in range(2):
            try:
                r = _chain(tx, ty, tacc, tuple(_compiled(f, key) for f in fns), plan, m.L)
                break
            except Exception as err:  # noqa: BLE001 (inductor raises many kinds; the fallback is exact)
                if attempt == 0 and "RecompileLimit" in type(err).__name__:
                    _retire(key)  # too many shapes for one copy: fresh copies, once
                    continue
                _FAILED.append(f"{type(err).__name__}: {err}")
                warnings.warn(f"the compiled matmul kernel failed ({_FAILED[-1][:300]}); "
                              "the numpy kernel runs instead (the same bits)", RuntimeWarning,
                              stacklevel=3)
                break
        if r is not False:
            r = r.numpy()
    else:
        r = _chain(xK, yK, acc, fns, plan, m.L)
    if r is False:  # a subnormal or overflowing result, or no compiled kernel: numpy's
        return chain_matmul_fast(x, y, in_fmt, m, None if c is None else
                                 np.broadcast_to(c, out_shape).reshape(acc.shape),
                                 (nb, rows, cols)).reshape(out_shape)
    return r.astype(np.float64).reshape(out_shape)


# Elements one call of ``block_emax`` forms: its products' exponent sums on numpy (stored),
# its outputs when compiled (the sums are not stored)
_EMAX_ELEMS = 1 << 22


def _chain(xK, yK, acc, fns, plan: _Plan, L: int):
    """The K chain: the operands' exponents, ``block_emax`` over groups of steps (the full
    blocks of L, then the tail), one ``sum_step`` per step; False where an output left
    the plain range."""
    exps, emax, add = fns
    xp = namespace(acc)
    exK, eyK = exps(xK, yK, plan.emin)
    K, (_, B, M), N = xK.shape[0], xK.shape, yK.shape[-1]
    full, tail = divmod(K, L)
    per = max(B, yK.shape[1]) * M * N * (L if xp.name == "numpy" else 1)
    group = max(1, min(full, _EMAX_ELEMS // per))
    groups: dict = {}

    def ep(s):  # (group, index) of step s's products' e_max (a group at a time, on first use)
        if s not in groups:
            groups.clear()
            if s < full:
                g = min(group, full - s)
                e = emax(exK, eyK, s * L, g, L, plan.floor)
            else:
                g, e = 1, emax(exK, eyK, full * L, 1, tail, plan.floor)
            groups.update({s + i: (e, i) for i in range(g)})
        return groups[s]

    n = full + (tail > 0)
    with np.errstate(all="ignore"):
        e0, i0 = ep(0)
        up = step_scale(e0[i0], acc, plan.floor, plan.F, plan.wide, plan.after)
        for s in range(n):
            eg, i = ep(s + 1) if s + 1 < n else ep(s)  # the last step's "next" is unused
            acc, up = add(xK, yK, s * L, min(L, K - s * L), up, acc, eg, i, *plan.consts())
    if bool((acc != acc).any()):  # NaN: an output left the plain range (``sum_step``)
        return False
    return acc


def _batched(v, batch: tuple, nb: int):
    """v (..., R, C) as (1 or nb, R, C): leading axes broadcast to ``batch`` and flattened
    (an operand without batch axes, or with only ones, stays one matrix)."""
    lead = v.shape[:-2]
    if int(np.prod(lead, dtype=np.int64)) == 1:
        return v.reshape((1,) + v.shape[-2:])
    return np.broadcast_to(v, batch + v.shape[-2:]).reshape((nb,) + v.shape[-2:])
