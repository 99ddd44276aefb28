"""Threads: every chunked path on 1 thread and on N threads, and the targets of issue 14.

    python benchmarks/bench_threads.py              # 10 million elements, 256^3 matmul
    python benchmarks/bench_threads.py --n 1e6      # quicker

For each path the 1-thread and the N-thread runs (N = ``--threads``, default the usable
cores) are interleaved and the best of ``--repeat`` kept, and the two results are
checked to be the same bits.  Then the targets of issue 14, each measured in this run:

* RNE cast of N float64 (81 binades), every format: time / a single-threaded
  ``np.copyto`` of the same array (target <= 3) and the 2-thread speed-up (>= 1.7);
* casts of 1,000 elements (no slower than before threads: compare with the README);
* elementwise add / mul / fma in bf16 and fp8_e4m3 / numpy's float64 op (<= 6), on
  the operands of bench_ops.py (normal values times 4, in the format);
* stochastic rounding of inputs with a remainder (int64 past 2**53) / RNE of the same
  data (<= 3);
* ff.matmul 256^3 bf16, model="h100" (<= 0.1 s) and fp32 sequential (<= 0.045 s);
* peak extra memory (tracemalloc) of the chunked paths on ``--mem-n`` elements, against
  the bound chunk bytes x a few buffers x threads;
* and numpy alone on the same pool: ten cheap in-place ufunc passes per chunk against
  one np.sin, 1 and N threads: the speed-up that cheap passes (what a rounding is made
  of) can reach on this machine, whatever floatfmt does.

On a shared machine the wall-clock speed-up of threads is bounded by the idle cores:
the load average is printed with the tables.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import floatfmt as ff  # noqa: E402
from floatfmt.core import rounding, threads  # noqa: E402

FORMATS = ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1", "fp32", "tf32",
           "int8"]


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(1.0, 2.0, n) * np.exp2(rng.integers(-40, 41, n).astype(np.float64))
    x *= rng.choice(np.array([-1.0, 1.0]), n)
    x[::1000] = 0.0
    return x


def paired(fns, repeat):
    """Best wall time of each function in ``fns``, the runs interleaved (after a warm-up)."""
    for f in fns:
        f()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            f()
            best[i] = min(best[i], time.perf_counter() - t)
    return best


def on(n_threads, fn):
    def run():
        with ff.limit_threads(n_threads):
            return fn()
    return run


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        return bool(np.array_equal(np.where(np.isnan(a), np.nan, a).view(np.int64),
                                   np.where(np.isnan(b), np.nan, b).view(np.int64)))
    return bool(np.array_equal(a, b))


def peak_extra(fn) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    r = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - np.asarray(r).nbytes


def numpy_limit(x, n_threads, rep):
    """What threads can gain here with numpy alone: cheap in-place ufunc passes (what a
    rounding is made of) against one expensive ufunc, chunk by chunk over parts of
    ``threads.PART`` elements shared by floatfmt's pool."""
    buf = x.copy()
    parts = -(-buf.size // threads.PART)

    def passes(chunk, heavy):
        def part(p):
            for i in range(p * threads.PART, min(buf.size, (p + 1) * threads.PART), chunk):
                c = buf[i:i + chunk]
                if heavy:
                    np.sin(c, out=c)
                else:
                    for _ in range(10):
                        np.multiply(c, 1.0, out=c)
        return lambda: threads.run_parts(parts, part)

    print(f"\nnumpy alone on {buf.size:,} float64, chunks in parts of {threads.PART:,} "
          "shared by the same pool (the ceiling for cheap passes on this machine):")
    for label, chunk, heavy in (("10 x np.multiply in place, chunks of 2**15", 1 << 15, False),
                                ("10 x np.multiply in place, chunks of 2**17", 1 << 17, False),
                                ("np.sin in place, chunks of 2**15", 1 << 15, True)):
        t1, tn = paired([on(1, passes(chunk, heavy)), on(n_threads, passes(chunk, heavy))], rep)
        print(f"  {label:<44}{t1 * 1e3:8.1f} ms{tn * 1e3:8.1f} ms{t1 / tn:7.2f}x")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--size", type=int, default=256, help="matmul size")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=max(2, usable_cores()))
    ap.add_argument("--mem-n", type=float, default=3e7, help="elements for the memory table")
    args = ap.parse_args(argv)
    n, N, rep = int(args.n), args.threads, args.repeat
    x = data(n)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{usable_cores()} usable cores, {N} threads against 1; block {threads.BLOCK:,} "
          f"elements, chunk {rounding._CHUNK:,}; load average {load:.1f}; best of {rep}")
    dst = np.empty_like(x)
    t_copy = paired([lambda: np.copyto(dst, x)], rep)[0]
    print(f"np.copyto of {n:,} float64 (one thread): {t_copy * 1e3:.2f} ms\n")

    # operands of the elementwise ops as bench_ops.py draws them (normal, times 4)
    g = np.random.default_rng(0)
    xb, yb, zb = (ff.cast(g.standard_normal(n) * 4, "bf16") for _ in range(3))
    x8, y8, z8 = (ff.cast(g.standard_normal(n) * 4, "fp8_e4m3", overflow="saturate")
                  for _ in range(3))
    codes = ff.encode(x, "bf16")
    big = (np.random.default_rng(3).integers(2 ** 55, 2 ** 62, n) | 1)
    s = args.size
    A = np.random.default_rng(4).standard_normal((s, s))
    B = np.random.default_rng(5).standard_normal((s, s))
    M2 = data(n, 6).reshape(-1, 1000)
    paths = [
        ("cast bf16 RNE", lambda: ff.cast(x, "bf16")),
        ("cast fp8_e4m3 RNE", lambda: ff.cast(x, "fp8_e4m3")),
        ("cast bf16 SR (seed)", lambda: ff.cast(x, "bf16", "sr", rng=1)),
        ("cast bf16 SR, remainder", lambda: ff.cast(big, "bf16", "sr", rng=1)),
        ("encode fp8_e4m3", lambda: ff.encode(x, "fp8_e4m3")),
        ("decode bf16", lambda: ff.decode(codes, "bf16")),
        ("classify fp16", lambda: ff.classify(x, "fp16")),
        ("next_up bf16", lambda: ff.next_up(x, "bf16")),
        ("add bf16", lambda: ff.add(xb, yb, "bf16")),
        ("mul fp8_e4m3", lambda: ff.mul(x8, y8, "fp8_e4m3")),
        ("fma bf16", lambda: ff.fma(xb, yb, zb, "bf16")),
        ("div bf16", lambda: ff.div(xb, yb, "bf16")),
        ("sum axis=0 bf16 (fp32 acc)", lambda: ff.sum(M2, "bf16", acc_fmt="fp32", axis=0)),
        (f"matmul {s}^3 bf16 h100", lambda: ff.matmul(A, B, "bf16", model="h100")),
        (f"matmul {s}^3 bf16 fp32 seq", lambda: ff.matmul(A, B, "bf16", acc_fmt="fp32")),
    ]
    print(f"{'path':<30}{'1 thread':>12}{f'{N} threads':>12}{'speed-up':>10}  same bits")
    print("-" * 76)
    times = {}
    for name, fn in paths:
        t1, tn = paired([on(1, fn), on(N, fn)], rep)
        ok = same(on(1, fn)(), on(N, fn)())
        times[name] = (t1, tn)
        print(f"{name:<30}{t1 * 1e3:>10.2f}ms{tn * 1e3:>10.2f}ms{t1 / tn:>9.2f}x  {ok}")

    print("\nTargets of issue 14 (this run)")
    print(f"\nRNE cast of {n:,} float64 / np.copyto ({t_copy * 1e3:.2f} ms); target <= 3x "
          f"with {N} threads, and 2 threads >= 1.7x faster than 1")
    print(f"{'format':<12}{'1 thread':>10}{'x copy':>8}{f'{N} threads':>12}{'x copy':>8}"
          f"{'speed-up':>10}")
    worst = 0.0
    for f in FORMATS:
        t1, tn = paired([on(1, lambda: ff.cast(x, f)), on(N, lambda: ff.cast(x, f))], rep)
        worst = max(worst, tn / t_copy)
        print(f"{f:<12}{t1 * 1e3:>8.1f}ms{t1 / t_copy:>8.2f}{tn * 1e3:>10.1f}ms"
              f"{tn / t_copy:>8.2f}{t1 / tn:>9.2f}x")
    xs = x[:1000]
    t_small = paired([lambda: ff.cast(xs, "bf16"), lambda: ff.cast(xs, "fp8_e4m3")], 200)
    print(f"\ncast of 1,000 float64: bf16 {t_small[0] * 1e6:.1f} us, fp8_e4m3 "
          f"{t_small[1] * 1e6:.1f} us")

    print(f"\nelementwise ops on {n:,} values in the format / numpy float64 (target <= 6x)")
    xf, yf, zf = xb.copy(), yb.copy(), zb.copy()
    t_add, t_mul, t_fma = paired([lambda: np.add(xf, yf), lambda: np.multiply(xf, yf),
                                  lambda: np.add(np.multiply(xf, yf), zf)], rep)
    print(f"numpy float64: add {t_add * 1e3:.2f} ms, mul {t_mul * 1e3:.2f} ms, "
          f"a*b+c {t_fma * 1e3:.2f} ms")
    for fmt, (a, b, c) in (("bf16", (xb, yb, zb)), ("fp8_e4m3", (x8, y8, z8))):
        r = paired([on(N, lambda: ff.add(a, b, fmt)), on(N, lambda: ff.mul(a, b, fmt)),
                    on(N, lambda: ff.fma(a, b, c, fmt))], rep)
        print(f"{fmt:<10} add {r[0] / t_add:5.2f}x  mul {r[1] / t_mul:5.2f}x  "
              f"fma {r[2] / t_fma:5.2f}x   ({N} threads)")

    print("\nstochastic rounding with a remainder (int64 past 2**53) / RNE of the same data "
          "(target <= 3x)")
    t_rne, t_sr = paired([on(N, lambda: ff.cast(big, "bf16")),
                          on(N, lambda: ff.cast(big, "bf16", "sr", rng=1))], rep)
    print(f"RNE {t_rne * 1e3:.1f} ms, SR {t_sr * 1e3:.1f} ms: {t_sr / t_rne:.2f}x")

    print(f"\nmatmul {s}^3 bf16 (targets at 256: h100 <= 0.1 s, fp32 sequential <= 0.045 s)")
    for name in (f"matmul {s}^3 bf16 h100", f"matmul {s}^3 bf16 fp32 seq"):
        t1, tn = times[name]
        print(f"{name:<30} 1 thread {t1:.3f} s, {N} threads {tn:.3f} s")

    numpy_limit(x, N, rep)

    m = int(args.mem_n)
    print(f"\npeak extra memory (tracemalloc, beyond input and result) on {m:,} elements")
    xm = np.nan_to_num(data(m, 7))
    xmb = ff.cast(xm, "bf16")
    chunk = 8 * rounding._CHUNK
    mem_paths = [("cast fp8_e4m3", lambda: ff.cast(xm, "fp8_e4m3")),
                 ("encode bf16", lambda: ff.encode(xm, "bf16")),
                 ("add bf16", lambda: ff.add(xmb, xmb, "bf16")),
                 ("next_up bf16", lambda: ff.next_up(xm, "bf16"))]
    print(f"{'path':<16}" + "".join(f"{f'{t} thread(s)':>14}" for t in (1, N))
          + f"{'chunk bytes':>14}")
    for name, fn in mem_paths:
        row = [peak_extra(on(t, fn)) for t in (1, N)]
        print(f"{name:<16}" + "".join(f"{v / 2 ** 20:>12.2f}MB" for v in row)
              + f"{chunk / 2 ** 20:>12.2f}MB")


if __name__ == "__main__":
    main()
