"""The timing loop shared by the benchmarks (run them as `python benchmarks/bench_*.py`)."""

import time


def times(fn, repeat, warmup=False):
    """Wall-clock seconds of `repeat` calls of fn (after one untimed call if warmup)."""
    if warmup:
        fn()  # first-touch of freed pages, caches, CPU clock
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def best(fn, repeat, warmup=False):
    """The fastest of `repeat` timed calls: the least disturbed by other load."""
    return min(times(fn, repeat, warmup))
