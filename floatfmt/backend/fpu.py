"""IEEE arithmetic for floatfmt's own computations, whatever the calling thread's
floating-point unit is set to.

floatfmt rounds with float64 (and float32) arithmetic that must keep subnormal numbers:
``cast(5e-324, "fp16", "up")`` is 2**-24 only if 5e-324 is read as itself.  A thread can
be set to flush them: x86's MXCSR has DAZ (subnormal inputs read as zero) and FTZ
(subnormal results written as zero), Arm's FPCR has FZ.  ``torch.set_flush_denormal(True)``
sets them on the calling thread, a shared library built with ``-ffast-math`` sets them
when it is loaded, and threads started afterwards inherit them.  Under them numpy and
Python floats give other numbers, silently.

``ieee()`` (a context manager) and ``ieee_entry`` (a decorator) run floatfmt's code with
those bits clear and put the caller's state back afterwards, exactly:

* the check is one Python float multiplication (``5e-324 * 1.0``, zero under either bit;
  about 0.1 us), so a thread that does not flush pays only that;
* Linux with glibc or musl on x86-64 / AArch64: the state is read and written with
  ``fegetenv`` / ``fesetenv`` of the C library (through ``ctypes``; no compiler), with
  only the DAZ / FTZ bits (x86) or FZ (Arm) cleared;
* elsewhere, when torch is imported: ``torch.set_flush_denormal(False)``, then ``True``
  again after (torch's own switch, which sets the bits together);
* when neither can clear it, a ``FloatingPointError`` says so: never a wrong number.

floatfmt's thread pool runs each part under ``ieee()`` too (its workers inherit the state
of the thread that started them).  tests/test_fpu.py runs the public functions, the
torch emulation included, under ``torch.set_flush_denormal(True)`` on subnormal inputs
and compares them with the results on an IEEE thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import platform
import struct
import sys
from typing import Any, Callable, Iterator, TypeVar

__all__ = ["flushing", "ieee", "ieee_entry", "pow2"]

F = TypeVar("F", bound=Callable[..., Any])

_TINY, _ONE = 5e-324, 1.0


def flushing() -> bool:
    """Whether this thread's float arithmetic flushes subnormals (DAZ or FTZ, Arm's FZ).

    >>> flushing()
    False
    """
    tiny, one = _TINY, _ONE  # (names, not literals: the product is formed at run time)
    return tiny * one == 0.0


def _env() -> Any:
    """(libc, the byte offset and mask of the flush bits in ``fenv_t``), or None."""
    env = getattr(_env, "cached", False)
    if env is False:
        env = None
        machine = platform.machine().lower()
        where = {"x86_64": (28, 0x8040), "amd64": (28, 0x8040),
                 "aarch64": (0, 1 << 24), "arm64": (0, 1 << 24)}.get(machine)
        if sys.platform.startswith("linux") and where is not None:
            for first in (True, False):
                try:  # the process's own symbols first (Python links libm): no ldconfig run
                    lib = ctypes.CDLL(None if first else ctypes.util.find_library("m") or "libm.so.6")
                    lib.fegetenv.argtypes = lib.fesetenv.argtypes = [ctypes.c_void_p]
                    env = (lib, *where)
                    break
                except (OSError, AttributeError):
                    continue
        _env.cached = env  # type: ignore[attr-defined]
    return env


def _clear() -> Callable[[], None]:
    """Clear this thread's flush bits; returns the function that puts them back."""
    env = _env()
    if env is not None:
        lib, off, mask = env
        saved = (ctypes.c_uint8 * 64)()
        if lib.fegetenv(saved) == 0:
            new = (ctypes.c_uint8 * 64)(*saved)
            word = int.from_bytes(bytes(new[off:off + 4]), "little") & ~mask
            new[off:off + 4] = list(word.to_bytes(4, "little"))
            if lib.fesetenv(new) == 0 and not flushing():
                return lambda: lib.fesetenv(saved)
            lib.fesetenv(saved)
    torch = sys.modules.get("torch")
    if torch is not None and torch.set_flush_denormal(False) and not flushing():
        return lambda: torch.set_flush_denormal(True)
    raise FloatingPointError(
        "this thread's floating-point unit flushes subnormal numbers to zero (denormals-are-"
        "zero / flush-to-zero, as torch.set_flush_denormal(True) or a library built with "
        "-ffast-math sets it), floatfmt needs them to round exactly, and it cannot switch "
        f"the mode off on this platform ({sys.platform}, {platform.machine()}): turn it off "
        "before calling floatfmt (torch.set_flush_denormal(False))")


@contextlib.contextmanager
def ieee() -> Iterator[None]:
    """Run the block with this thread's flush bits clear (see the module docstring);
    the caller's state is back afterwards, also when the block raises.

    >>> with ieee():
    ...     flushing()
    False
    """
    if not flushing():
        yield
        return
    restore = _clear()
    try:
        yield
    finally:
        restore()


def ieee_entry(fn: F) -> F:
    """``fn`` run under ``ieee()`` (for entry points that are not module-level functions
    with doctests: those check ``flushing()`` in their own body, so that doctest still
    finds them)."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not flushing():
            return fn(*args, **kwargs)
        with ieee():
            return fn(*args, **kwargs)
    run.__wrapped_ieee__ = True  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


def pow2(e: int) -> float:
    """``2.0 ** e``, built from its float64 bits where it is a float64 (the subnormal ones
    included), so that it does not depend on the thread: under flushing ``2.0 ** -1074``
    is 0.0.  Exponents below -1074 give 0.0 and above 1023 raise OverflowError, as ``**``.

    >>> pow2(-1074) == 5e-324, pow2(3), pow2(-1075)
    (True, 8.0, 0.0)
    """
    if -1074 <= e <= 1023:
        bits = (e + 1023) << 52 if e >= -1022 else 1 << (e + 1074)
        return float(struct.unpack("<d", bits.to_bytes(8, "little"))[0])
    return 2.0 ** e
