"""Array type in = array type out: how torch tensors reach floatfmt's kernels.

Every public function that takes arrays (``cast``, ``encode``, ``decode``, the
arithmetic of ``ops``, ``sum`` / ``dot`` / ``matmul`` / ``mma``, ``quantize`` /
``dequantize`` / ``fake_quant``) returns the kind of array it was given: numpy in, numpy out; a ``torch.Tensor`` in, a tensor out
on the same device.  This module is the one place that decides how a tensor is
computed.  It never imports torch (a tensor exists only once the user imported
torch; the module is taken from ``sys.modules`` through ``floatfmt.backend.namespace``).

The rule, and why:

* **CPU tensors run the numpy kernels on zero-copy views** of the tensor's memory
  (``t.detach().numpy()`` in, ``torch.from_numpy`` out).  The numpy path is the
  library's reference and fast path (in-place ufuncs over cache-sized chunks,
  reductions that skip work, error-free transformations with exact slow paths);
  running it on the tensor's own memory makes torch CPU equal to numpy *by
  construction* and as fast, with no second implementation to keep in step.
  bfloat16 and float8 tensors, which numpy cannot view, are widened to float64
  first (exact; the data is already on the host).  One exception: ``cast`` of a
  float32 CPU tensor to bf16 or fp16 under nearest even (overflow to Inf, no ftz / daz)
  is torch's own one-pass conversion where a probe shows it gives the numpy kernel's bits
  (``floatfmt.backend.native_convert``: x86-64, NaN-free tensors; all 2**32 float32
  patterns checked in tests/test_native_convert.py).
* **Tensors on another device (CUDA)** run code written once over the array
  namespace (``floatfmt.backend.namespace``) with torch ops on that device: the rounding
  routine's general implementation (``cast``, ``encode``, ``decode``,
  ``next_up``, ``next_down``, ``ulp``, ``pack``, ``unpack`` and the rounding
  inside ``floatfmt.torch.fake_quant``), the arithmetic
  (``floatfmt.arith.ops``: ``add sub mul fma div sqrt neg abs minimum maximum``, portable
  entries whose rule ``ops.*_rule`` is written over the namespace and runs on numpy too;
  every format, fp64 and wide custom ones included, every rounding mode,
  stochastic ones included), ``sum`` in
  every order and ``dot`` / ``matmul`` without a model in every order
  (``floatfmt.arith.accumulate``, one body for both: ``portable``), ``matmul`` / ``dot`` with a tensor-core
  ``model`` (every preset, NVIDIA and AMD, the epilogue included), ``mma`` and
  ``block_scaled_mma`` (``floatfmt.arith.matrixunit``: ``tensorcore``, ``tfdpa``, ``fdpa``,
  ``gemm``, one body over the namespace for numpy arrays and tensors, ``portable``),
  and ``quantize`` / ``fake_quant`` / ``QuantizedTensor.dequantize`` / ``.codes`` /
  ``.limits`` for every scheme (written once over the namespace: ``floatfmt.scaling.quantize_schemes``,
  ``floatfmt.scaling.quantized_tensor``; stochastic rounding too, inexact quotients
  x / scale carrying their exact remainder), and ``block_scaled_matmul`` /
  ``recipe_matmul`` (``floatfmt.training.recipes``: their steps through those entries).
  Functions, formats or options without device code (none of those listed above;
  ``calibration="mse"`` and ``sqrt`` under stochastic rounding included) raise
  ``NotImplementedError`` naming the function and the device, never a silent copy
  to the host and back.
* The device code is proven equal to the numpy kernels on CPU tensors: inside
  ``force_namespace()`` (or with the environment variable
  ``FLOATFMT_TORCH_PATH=namespace``) CPU tensors take the namespace code too;
  tests/test_torch*.py compare both paths bit for bit.

Result dtypes: as the numpy path gives them.  ``cast`` keeps a float32 / float16 /
bfloat16 / float8 input dtype where it holds every value of the target format,
else float64 (float64 in gives float64); the arithmetic, sums and products give
float64; ``encode`` torch's unsigned integer dtype of the code width.

Stochastic rounding: ``cast`` / ``encode`` of a tensor always take the namespace
code (random bits from a ``torch.Generator`` on the tensor's device, or an int
seed), on CPU as on CUDA.  The arithmetic, sums and products on CPU tensors draw
from numpy (an int seed or a numpy Generator, as for numpy arrays); on CUDA (and
under ``force_namespace``) from a ``torch.Generator`` on the device or an int seed,
one generator per call for the operands' casts and every rounding, with the exact
remainder handed to the one rounding routine (``ops.OpCall``; tensor-core products:
the operands' casts, the epilogue and ``out_fmt`` in the order that
``floatfmt.arith.matrixunit.gemm`` states).  The two streams
differ, so a seed gives different bits on the two paths; the rule (the probability
of each neighbour, ``sr_bits``) is the same, and given the same random numbers so
are the bits (tests/test_torch_sr.py, tests/test_torch_tensorcore_sr.py).

Autograd: ``cast`` and ``floatfmt.torch.fake_quant`` attach a straight-through
gradient (see their docstrings); so do ``ff.fake_quant`` and
``ff.quantize(x).dequantize()`` on tensors, on every device: the gradient of x passes
unchanged, or with ``ste="clipped"`` only where x lies inside the
``QuantizedTensor``'s ``limits()`` (``tensor_entry``'s ``ste``).  The other functions listed above are **not differentiable**: their
results are new tensors without a graph (``requires_grad`` False), whatever the
inputs.

Dataclass results (``ff.quantize``'s ``QuantizedTensor``) hold tensors in their
array fields; their methods that compute (``dequantize``, ``codes``) go through
``tensor_method``.

``torch.compile``: while dynamo traces a function that calls floatfmt
(``torch.compiler.is_compiling()``), every entry here (``tensor_entry``,
``tensor_method``, and ``cast`` through ``run_eager``; on tensors, arrays or Python
numbers) runs as one call that dynamo does not trace (``torch.compiler.disable``): a graph break around floatfmt's call,
which then runs eagerly on real tensors exactly as without compile (the numpy kernels
cannot run on dynamo's FakeTensors: ``np.copyto`` refuses them).  So a compiled model
that calls floatfmt gives the bits of the eager one.

Bad input is refused before any work, with the function's name: complex
tensors, dtypes other than floating-point / integer / bool (TypeError); numpy
arrays (or ``FPArray``) mixed with tensors in one call (TypeError: convert one
side explicitly); tensors on two devices, or on a device other than ``DEVICES``
(ValueError, e.g. ``meta``; MPS has no float64).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import sys
from typing import Any, Callable, Iterator, TypeVar, cast

import numpy as np

from .fpu import flushing, ieee
from .namespace import is_tensor, namespace

__all__ = ["tensor_entry", "tensor_method", "fields_device", "STE_SOURCE", "STE_MASK",
           "compiling", "run_eager",
           "host_kernels", "force_namespace", "to_host", "from_host",
           "check_tensors", "host_kernels_device", "ENV_VAR", "DEVICES", "LIST_OPERANDS"]

ENV_VAR = "FLOATFMT_TORCH_PATH"
#: Operands that may be Python lists of numbers beside tensors, on every device
#: (``quantize(x, scale=[...], zero_point=[...])``); other lists raise TypeError.
LIST_OPERANDS = ("scale", "zero_point")
_FORCE = [os.environ.get(ENV_VAR, "auto").strip().lower() == "namespace"]

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def force_namespace(on: bool = True) -> Iterator[None]:
    """Within the block, CPU tensors take the namespace (device) code instead of the
    numpy kernels wherever a function has one (used by the equality tests; functions
    without device code then raise NotImplementedError for CPU tensors too)."""
    old = _FORCE[0]
    _FORCE[0] = bool(on)
    try:
        yield
    finally:
        _FORCE[0] = old


def host_kernels(t: Any) -> bool:
    """True when the tensor ``t`` is computed by the numpy kernels (a CPU tensor, and
    ``force_namespace`` not in effect)."""
    return t.is_cpu and not _FORCE[0]  # (is_cpu: no device object made, as t.device makes)


def host_kernels_device(device: Any) -> bool:
    """``host_kernels`` for a device rather than a tensor."""
    return device.type == "cpu" and not _FORCE[0]


# devices whose tensors floatfmt computes on (CUDA: where a device implementation exists)
DEVICES = ("cpu", "cuda")

# dtypes numpy can view without a copy (torch name -> the same layout in numpy)
_VIEWABLE = {"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}
_ACCEPTED = ("floating-point (float64, float32, float16, bfloat16, float8_*), "
             "integer (int8..int64, uint8) or bool")


def _dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def check_tensors(name: str, operands: list[Any], codes: bool = False,
                  names: list[str] | None = None) -> Any:
    """Check the operands of one call that holds at least one tensor; return the device.

    TypeError for a complex tensor, a tensor dtype outside ``_ACCEPTED`` (``codes``:
    bit patterns, where torch's uint16/32/64, as ``encode`` returns them, are accepted
    too), or a numpy array / FPArray among the operands (no silent mixing of array
    kinds), or another operand the device code does not take (``_check_beside``: a list,
    a numpy scalar, a Fraction ...); ValueError for tensors on two devices or on a
    device not in ``DEVICES``, or a Python int past 2**53 beside tensors."""
    device = None
    for k, x in enumerate(operands):
        if is_tensor(x):
            if x.is_complex():
                raise TypeError(f"{name}: complex tensors are not supported (got {x.dtype}); "
                                f"accepted: {_ACCEPTED} tensors")
            if codes and (x.is_floating_point() or _dtype_name(x) == "bool"):
                raise TypeError(f"{name}: codes must be an integer tensor (e.g. from "
                                f"ff.encode), not {x.dtype}")
            if not (x.is_floating_point() or _dtype_name(x) in _VIEWABLE
                    or codes and _dtype_name(x) in ("uint16", "uint32", "uint64")):
                raise TypeError(f"{name}: unsupported tensor dtype {x.dtype}; accepted: "
                                f"{_ACCEPTED}")
            if x.device.type not in DEVICES:
                raise ValueError(f"{name}: tensors on {x.device} are not supported; accepted "
                                 f"devices: {', '.join(DEVICES)}")
            if device is None:
                device = x.device
            elif x.device != device:
                raise ValueError(f"{name}: tensors on two devices ({device} and {x.device}); "
                                 "put every operand on one device")
        elif isinstance(x, np.ndarray) or hasattr(x, "fmt") and hasattr(x, "_v"):
            kind = "a numpy array" if isinstance(x, np.ndarray) else type(x).__name__
            raise TypeError(f"{name}: {kind} mixed with torch tensors; give all array operands "
                            "as tensors (torch.from_numpy) or all as numpy arrays (t.numpy())")
        else:
            _check_beside(name, x, names[k] if names and k < len(names) else "it")
    return device


def _numeric(s: str) -> bool:
    """Whether the string is a number (decimal or hex float) rather than an option word."""
    try:
        float.fromhex(s) if s.strip().lower().lstrip("+-").startswith("0x") else float(s)
    except ValueError:
        return False
    return True


def _check_beside(name: str, x: Any, param: str = "it") -> None:
    """An operand that is not a tensor, in a call that holds tensors: None, a Python
    bool / int / float (ints up to 2**53, which float64 holds), a string option (such
    as ``scale="amax"``) or a dataclass operand (``QuantizedTensor``) pass; lists,
    tuples, numpy scalars, Fractions, Decimals and numeric strings (``"0.1"``, which
    the numpy path reads exactly) raise TypeError, on every device
    alike (the device code takes tensors and Python numbers only, so the CPU path must
    not accept more)."""
    if x is None or isinstance(x, str) and not _numeric(x) or dataclasses.is_dataclass(x):
        return
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic) \
            or isinstance(x, np.float64):
        if isinstance(x, int) and not isinstance(x, bool) and abs(x) > 2 ** 53:
            raise ValueError(f"{name}: the Python int {x} beside torch tensors is past 2**53, "
                             "which a float64 tensor cannot hold; accepted beside tensors: "
                             "ints up to 2**53 in magnitude and floats")
        return
    raise TypeError(f"{name}: {type(x).__name__} mixed with torch tensors; accepted beside "
                    "tensors: tensors on the same device and Python int / float numbers "
                    f"(give {param} as a tensor: torch.tensor(...) on the tensors' device)")


def to_host(x: Any) -> Any:
    """A CPU tensor as a numpy array sharing its memory (bfloat16 / float8: widened to a
    float64 copy, exactly, by ``_xp``'s ``intake``, so a float8 NaN has the sign
    ml_dtypes gives it); anything else is returned unchanged."""
    if not is_tensor(x):
        return x
    t = x.detach()
    if _dtype_name(t) in _VIEWABLE:
        return t.resolve_neg().resolve_conj().numpy()
    if t.is_floating_point():  # bfloat16 / float8: the device intake's widening, NaNs as
        return namespace(t).intake(t)[0].numpy()  # ml_dtypes gives them (fnuz NaN negative)
    return t.to(namespace(t).t.float64).numpy()


def from_host(r: Any, device: Any) -> Any:
    """The result of a numpy kernel as tensors on ``device`` (a CPU device): arrays
    become tensors sharing their memory (copied first if read-only or a numpy dtype
    torch lacks), Python / numpy scalars 0-d tensors (float64 for floats), tuples and
    lists element by element; None stays None."""
    torch = _torch()
    if r is None:
        return None
    if isinstance(r, tuple):
        return tuple(from_host(v, device) for v in r)
    if isinstance(r, list):
        return [from_host(v, device) for v in r]
    if isinstance(r, (bool, np.bool_)):
        return torch.tensor(bool(r), device=device)
    if isinstance(r, (float, np.floating)):
        return torch.tensor(float(r), dtype=torch.float64, device=device)
    if isinstance(r, (int, np.integer)):
        return torch.tensor(int(r), dtype=torch.int64, device=device)
    if dataclasses.is_dataclass(r) and not isinstance(r, type):
        return _map_fields(r, lambda v: from_host(v, device) if isinstance(v, np.ndarray) else v)
    if isinstance(r, np.ndarray):
        if r.dtype.kind == "f" and r.dtype.itemsize not in (2, 4, 8) or r.dtype.kind not in "fiub":
            r = r.astype(np.float64)  # e.g. an ml_dtypes array: exact in float64
        if not r.flags.writeable or any(s < 0 for s in r.strides):
            r = r.copy()
        return torch.from_numpy(r)
    return r


def _torch() -> Any:
    """The torch module (only called once a tensor has been seen)."""
    return sys.modules["torch"]


def compiling() -> bool:
    """Whether torch's dynamo is tracing the caller (``torch.compile``); False without
    torch imported (checked without importing it)."""
    f = _IS_COMPILING[0]
    if f is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        f = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _never
        _IS_COMPILING[0] = f
    return bool(f())


def _never() -> bool:
    return False


_IS_COMPILING: list[Any] = [None]  # torch.compiler.is_compiling, once torch is imported


_EAGER: dict[Any, Any] = {}


def run_eager(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` outside dynamo's tracing: ``fn`` wrapped once in
    ``torch.compiler.disable`` (recursive), so under ``torch.compile`` the call is a
    graph break and runs eagerly on real tensors (see the module docstring)."""
    w = _EAGER.get(fn)
    if w is None:
        w = _EAGER[fn] = _torch().compiler.disable(fn, recursive=True)
    return w(*args, **kwargs)


def _map_fields(obj: Any, fn: Callable[[Any], Any]) -> Any:
    """A copy of the dataclass ``obj`` with ``fn`` applied to its public fields (private
    ones, such as a cache, start empty; other attributes are not copied)."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        v = getattr(obj, f.name)
        if f.name.startswith("_"):
            if isinstance(v, dict):
                changes[f.name] = {}
            continue
        changes[f.name] = fn(v)
    return dataclasses.replace(obj, **changes)


def fields_device(obj: Any) -> Any:
    """The device of the first tensor among the public fields of the dataclass ``obj``
    (a ``QuantizedTensor`` made from a tensor), or None when it holds no tensor."""
    for f in dataclasses.fields(obj):
        v: Any = getattr(obj, f.name, None)
        if is_tensor(v):
            return v.device
    return None


def tensor_method(obj: Any, name: str, *args: Any,
                  device_impl: Callable[..., Any] | None = None,
                  portable: bool = False) -> Any:
    """``obj.name(*args)`` for a dataclass holding tensors (see ``fields_device``): on a
    CPU device the numpy method runs on a copy of ``obj`` whose fields are views of the
    tensors, and its result comes back as a tensor; a torch dtype among ``args`` is
    applied to the float64 result.  Other devices (or CPU under ``force_namespace``)
    call ``device_impl(obj, *args)``, or with ``portable`` the method's body
    ``obj._name(*args)`` (written over the array namespace, the same body the numpy
    method runs; a private ``name`` is that body itself) on the tensors; else raise NotImplementedError.  The
    result carries the straight-through gradient of the tensor ``obj`` was made from
    (``STE_SOURCE``), when that one requires grad."""
    if flushing():  # a thread that flushes subnormals: IEEE for the call (``fpu``)
        with ieee():
            return tensor_method(obj, name, *args, device_impl=device_impl, portable=portable)
    if compiling():
        return run_eager(tensor_method, obj, name, *args, device_impl=device_impl,
                         portable=portable)
    device = fields_device(obj)
    cls = type(obj).__name__
    if not host_kernels_device(device):
        if portable:
            # twins-scaling: a private name (``_codes_of``) is the portable body itself
            r = getattr(obj, name if name.startswith("_") else "_" + name)(*args)
        elif device_impl is None:
            raise _no_device_code(f"{cls}.{name}", device)
        else:
            r = device_impl(obj, *args)
    else:
        torch = _torch()
        dtypes = [a for a in args if isinstance(a, torch.dtype)]
        args = tuple(np.float64 if isinstance(a, torch.dtype) else a for a in args)
        host = _map_fields(obj, to_host)
        r = from_host(getattr(host, name)(*args), device)
        if dtypes and is_tensor(r):
            r = r.to(dtypes[0])
    src = getattr(obj, STE_SOURCE, None)
    if src is not None and is_tensor(r) and r.is_floating_point():
        r = namespace(src).straight_through(src, r, getattr(obj, STE_MASK, None))
    return r


STE_SOURCE = "_ste_source"
#: With ``ste="clipped"``: the bool tensor of where the gradient passes (``_inside``).
STE_MASK = "_ste_mask"


def _inside(result: Any, src: Any, device: Any) -> Any:
    """Where ``src`` lies strictly inside the clipping limits of a result that has
    ``limits()`` (``QuantizedTensor``; of numpy arrays on the host path, of tensors on
    the device path): the clipped straight-through mask, a bool tensor on ``device``."""
    lo, hi = result.limits()
    if is_tensor(lo):
        xs = src.detach()
        return (xs > lo) & (xs < hi)
    xs = to_host(src)
    return from_host(np.asarray((xs > lo) & (xs < hi)), device)


def _no_device_code(name: str, device: Any) -> NotImplementedError:
    return NotImplementedError(
        f"{name} has no {device.type} implementation yet: it runs on numpy arrays and CPU "
        f"tensors; the operands are on {device}. floatfmt does not copy them to the host "
        "silently; call .cpu() yourself if a host round trip is what you want")


# size: the docstring states the whole rule of how tensors reach a function (host view,
# portable body, device code, straight-through gradients), beside the code that does it
def tensor_entry(name: str, operands: tuple[str, ...],
                 device_impl: Callable[..., Any] | None = None,
                 ste: bool = False, codes: bool = False,
                 portable: bool = False) -> Callable[[F], F]:
    """Decorator: make the numpy-path function take torch tensors (the rule above).

    ``operands``: the names of the parameters that may hold arrays; any other keyword
    argument that holds a tensor or a numpy array (an option passed through
    ``**options``, as ``fake_quant``'s ``scale=``) is an operand too.  A call without
    a tensor among them is passed straight through (one type test per operand).
    With a tensor: the operands are checked (``check_tensors``); CPU tensors are
    viewed as numpy arrays, the function runs, and its results come back as CPU
    tensors (``from_host``; a dataclass result gets its array fields as tensors);
    other devices (or CPU under ``force_namespace``) call ``device_impl`` with the
    original arguments, or raise NotImplementedError.

    ``portable``: ``fn`` is written once over the array namespace (``xp =
    namespace(x)``), so on other devices (or CPU under ``force_namespace``) ``fn``
    itself runs on the tensors as given: one implementation of the rule, the CPU
    tensors' numpy path and the device path being the same body on two namespaces.
    (``device_impl`` is then not given.)

    ``codes``: the tensor operands are bit patterns (``pack``, ``unpack``): float and bool
    tensors are refused with a TypeError naming their dtype, before any widening.

    ``ste``: when the first operand is a tensor that requires grad, a tensor result
    carries its identity straight-through gradient, and a dataclass result keeps it
    (``STE_SOURCE``) for ``tensor_method`` (``quantize(x).dequantize()``).
    """
    if portable and device_impl is not None:
        raise ValueError(f"tensor_entry({name!r}): a portable function is its own device code; "
                         "give portable=True or device_impl, not both")

    def wrap(fn: F) -> F:
        params = list(inspect.signature(fn).parameters)
        where = [(params.index(p), p) for p in operands]
        positions = {i for i, _ in where}

        def pick(args: tuple, kwargs: dict) -> list[Any]:
            # quantize's per-channel scale / zero_point lists of numbers are taken by the
            # device code too: not checked as stray operands (``_check_beside``)
            return [None if p in LIST_OPERANDS and isinstance(v, (list, tuple)) else v
                    for p, v in ((p, args[i] if i < len(args) else kwargs.get(p))
                                 for i, p in where)]

        @functools.wraps(fn)
        def entry(*args: Any, **kwargs: Any) -> Any:
            if flushing():  # a thread that flushes subnormals: IEEE for the call (``fpu``)
                with ieee():
                    return entry(*args, **kwargs)
            if compiling():  # torch.compile: a graph break, then eager (module docstring)
                return run_eager(entry, *args, **kwargs)
            # arrays given through **options (fake_quant's scale=) are operands too
            extra = [k for k, v in kwargs.items() if k not in operands
                     and (is_tensor(v) or isinstance(v, np.ndarray))]
            ops = pick(args, kwargs) + [kwargs[k] for k in extra]
            if not any(is_tensor(x) for x in ops):
                return fn(*args, **kwargs)
            device = check_tensors(f"floatfmt.{name}", ops, codes=codes,
                                   names=[p for _, p in where] + extra)
            if host_kernels_device(device):
                args = tuple(to_host(a) if i in positions else a
                             for i, a in enumerate(args))
                kwargs = {k: (to_host(v) if k in operands or is_tensor(v) else v)
                          for k, v in kwargs.items()}
                host_r = fn(*args, **kwargs)
                r = from_host(host_r, device)
                limits_of = host_r
            elif portable:
                r = limits_of = fn(*args, **kwargs)
            elif device_impl is None:
                raise _no_device_code(f"floatfmt.{name}", device)
            else:
                r = limits_of = device_impl(*args, **kwargs)
            src = ops[0]
            if ste and is_tensor(src) and src.requires_grad:
                if is_tensor(r) and r.is_floating_point():
                    r = namespace(src).straight_through(src, r)
                elif dataclasses.is_dataclass(r):
                    object.__setattr__(r, STE_SOURCE, src)
                    if kwargs.get("ste") == "clipped":
                        object.__setattr__(r, STE_MASK, _inside(limits_of, src, device))
            return r

        entry.__wrapped_ieee__ = True  # type: ignore[attr-defined]  # (its first check: flushing)
        return cast(F, entry)
    return wrap
