"""Threads for the chunked paths: how many, and the loop that shares blocks among them.

The array paths (cast, encode / decode, classify, next_up / next_down / ulp, the
elementwise arithmetic, the matrix products) already work through cache-sized chunks
with numpy ufuncs, and numpy releases the GIL inside a ufunc.  An array of
``MIN_BLOCKS`` blocks of ``BLOCK`` elements or more is shared among threads of one
process in parts of about ``PART`` elements (whole blocks): each block is done, chunk by
chunk, by one thread, into its own slice of the result.  No result
depends on the thread count: a block computes the same values whichever thread runs
it, and the blocks never overlap.

How many threads (``get_num_threads``), first match wins:

1. the innermost ``limit_threads(n)`` block of the calling thread;
2. ``set_num_threads(n)`` (process-wide);
3. the environment variable ``FLOATFMT_NUM_THREADS``, else ``OMP_NUM_THREADS`` (the
   variable that threadpoolctl, OpenMP and BLAS libraries honour), read once;
4. the cores this process may run on (``os.sched_getaffinity``), else ``os.cpu_count()``.

Stochastic rounding and threads.  The random bits of an array of at most ``BLOCK``
elements are drawn from the caller's generator, in order, as always.  A longer array
draws one 63-bit integer ``k`` from the caller's generator, and block ``b`` (elements
``b * BLOCK`` to ``(b + 1) * BLOCK``) draws its bits, chunk by chunk in order, from
``numpy.random.default_rng([k, b])``.  So a seed gives the same result for every
thread count (one thread included), and successive calls with one generator differ.

Memory: each thread keeps its own chunk-sized scratch buffers, so the extra memory of a
call is a few chunks times the thread count, whatever the input size.

>>> import floatfmt as ff
>>> with ff.limit_threads(1):
...     ff.get_num_threads()
1
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..backend.fpu import ieee

__all__ = ["BLOCK", "PART", "MIN_BLOCKS", "get_num_threads", "set_num_threads",
           "limit_threads", "run_blocks", "run_parts", "block_rng", "pooled"]

BLOCK = 1 << 17
"""Elements of one block: the unit of stochastic rounding's random stream, and of the
work of a thread (see ``PART``, ``MIN_BLOCKS``)."""

PART = 1 << 20
"""Elements a thread takes at once (whole blocks; see ``run_blocks``).  Measured on the
2-core machine, RNE cast of 10**7 on 2 threads against 1: threads that take one block at
a time 1.1-1.3x (much of the gain goes to handing over the GIL and the blocks), 8 blocks
at a time 1.5-1.7x."""

MIN_BLOCKS = 4
"""Below this many blocks ``run_blocks`` does them all on the calling thread (measured on
the 2-core machine, cast and add/mul with 2 threads against 1: 2 blocks 0.90-0.98x,
4 blocks 1.03-1.15x, 8 blocks 1.02-1.32x, 80 blocks 1.27-1.69x)."""

_ENV = ("FLOATFMT_NUM_THREADS", "OMP_NUM_THREADS")

_state: dict[str, int | None] = {"set": None, "default": None}
_local = threading.local()  # .limits: stack of limit_threads values; .busy: inside a block
_pool_lock = threading.Lock()
_pool: list = [None, 0]  # [ThreadPoolExecutor or None, its worker count]


def _check(n: object, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{what} takes a positive integer, not {type(n).__name__}")
    if n < 1:
        raise ValueError(f"{what} takes a positive integer (1 = no threads), not {n}")
    return int(n)


def _default() -> int:
    """The thread count from the environment, else the usable cores (read once)."""
    d = _state["default"]
    if d is None:
        d = 0
        for var in _ENV:
            text = os.environ.get(var, "").strip().split(",")[0]  # OMP allows "4,2"
            if text:
                try:
                    d = int(text)
                except ValueError:
                    raise ValueError(f"{var}={os.environ[var]!r}: expected a positive "
                                     "integer number of threads") from None
                if d < 1:
                    raise ValueError(f"{var}={os.environ[var]!r}: expected a positive "
                                     "integer number of threads")
                break
        if not d:
            try:
                d = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                d = os.cpu_count() or 1
        _state["default"] = d
    return d


def get_num_threads() -> int:
    """The number of threads floatfmt's array paths use now, in the calling thread
    (see ``limit_threads``, ``set_num_threads``; default: ``FLOATFMT_NUM_THREADS``,
    else ``OMP_NUM_THREADS``, else the cores available to the process)."""
    limits = getattr(_local, "limits", None)
    if limits:
        return limits[-1]
    n = _state["set"]
    return n if n is not None else _default()


def set_num_threads(n: int | None) -> None:
    """Use ``n`` threads (1: none) for the array paths, process-wide; ``None`` goes
    back to the default (the environment, re-read, else the cores available).

    Results are bit-identical for every ``n``, stochastic rounding included."""
    _state["set"] = None if n is None else _check(n, "set_num_threads")
    if n is None:
        _state["default"] = None


@contextlib.contextmanager
def limit_threads(n: int) -> Iterator[int]:
    """Within the ``with`` block, the calling thread's array paths use at most ``n``
    threads (like ``threadpoolctl.threadpool_limits``; blocks nest, innermost wins).

    >>> import floatfmt as ff
    >>> with ff.limit_threads(2) as n:
    ...     n, ff.get_num_threads()
    (2, 2)
    """
    n = _check(n, "limit_threads")
    stack = getattr(_local, "limits", None)
    if stack is None:
        stack = _local.limits = []
    stack.append(n)
    try:
        yield n
    finally:
        stack.pop()


def _executor(workers: int) -> ThreadPoolExecutor:
    """The shared pool, with at least ``workers`` threads (grown when asked for more)."""
    with _pool_lock:
        ex, size = _pool
        if ex is None or size < workers:
            if ex is not None:
                ex.shutdown(wait=False)
            ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="floatfmt")
            _pool[0], _pool[1] = ex, workers
        return ex


def _forget_pool() -> None:
    """After fork: the child has none of the parent's worker threads."""
    _pool[0], _pool[1] = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def block_rng(key: int | None, b: int) -> np.random.Generator | None:
    """The generator of block ``b`` for the key drawn by ``run_blocks`` (see the module
    docstring); None when there is no key."""
    return None if key is None else np.random.default_rng([key, b])


def run_blocks(n: int, work: Callable[[int, int, np.random.Generator | None], None],
               rng: np.random.Generator | None = None) -> None:
    """Call ``work(i, j, g)`` for the blocks ``[i, j)`` of ``BLOCK`` elements of
    ``range(n)``, on up to ``get_num_threads()`` threads when there are ``MIN_BLOCKS``
    blocks or more, each thread taking runs of consecutive blocks (``PART`` elements, see
    ``run_parts``).

    ``g`` is the block's random generator: ``rng`` itself for a single block, else
    ``block_rng(k, b)`` with ``k`` drawn once from ``rng``; None when ``rng`` is None.
    """
    nb = -(-n // BLOCK)
    if nb <= 1:
        if n > 0:
            work(0, n, rng)
        return
    key = None if rng is None else int(rng.integers(0, 1 << 63))
    per = _blocks_per_part(nb)

    def part(p: int) -> None:
        for b in range(p * per, min(nb, (p + 1) * per)):
            work(b * BLOCK, min(n, (b + 1) * BLOCK), block_rng(key, b))

    run_parts(-(-nb // per), part)


def pooled(n: int) -> bool:
    """Whether ``run_blocks(n, ...)`` called here runs on more than one thread.

    >>> with limit_threads(2):
    ...     pooled(MIN_BLOCKS * BLOCK), pooled(BLOCK)
    (True, False)
    """
    return -(-n // BLOCK) >= MIN_BLOCKS and _blocks_per_part(-(-n // BLOCK)) < -(-n // BLOCK)


def _blocks_per_part(nb: int) -> int:
    """Consecutive blocks a thread takes at once: about ``PART`` elements, but at least
    two parts per thread while there are enough blocks (so that the threads stay busy
    to the end); all of them (one part, the calling thread) below ``MIN_BLOCKS``."""
    threads = get_num_threads()
    if threads <= 1 or nb < MIN_BLOCKS or getattr(_local, "busy", False):
        return nb
    return max(1, min(PART // BLOCK, nb // (2 * threads)))


def run_parts(count: int, work: Callable[[int], None]) -> None:
    """Call ``work(p)`` for ``p`` in ``range(count)``, on up to ``get_num_threads()``
    threads (each takes the next part when it is free; one thread when ``count`` < 2).

    ``work`` must write only its own part of a result and must not depend on which
    thread runs it or in which order the parts run.  A call made inside a part (by
    ``work``) runs on its own thread.  Workers run under the caller's numpy error
    state.  An exception is re-raised after every thread has stopped; when several
    parts fail, the first part's exception (the one a single thread would meet).
    """
    threads = 1 if getattr(_local, "busy", False) else min(get_num_threads(), count)
    if threads <= 1:
        for p in range(count):
            work(p)
        return
    counter = iter(range(count))  # shared: each thread takes the next part
    lock = threading.Lock()
    failed: dict[int, BaseException] = {}
    errs = np.geterr()  # numpy's error state is per thread: the workers take the caller's

    def take_parts() -> None:
        while True:
            with lock:
                p = next(counter, None)
                if p is None or failed:
                    return  # (parts below a failed one were taken already: they finish)
            try:
                with ieee():  # (a worker inherits the flush bits of the thread that started it)
                    work(p)
            except BaseException as e:  # noqa: BLE001 (re-raised by the caller)
                with lock:
                    failed[p] = e
                return

    def loop() -> None:
        _local.busy = True
        try:
            with np.errstate(**errs):
                take_parts()
        finally:
            _local.busy = False

    ex = _executor(threads - 1)
    futures: list[Future] = [ex.submit(loop) for _ in range(threads - 1)]
    loop()
    for f in futures:
        f.result()
    if failed:
        raise failed[min(failed)]
