"""Every benchmark table in one run: the machine, a plain copy, then cast, float32 cast
(against ml_dtypes and torch), ops, matmul and scaling (block quantisation) tables, and
the threads table (1 vs N threads per path, with the targets of issue 14).

    python benchmarks/run_all.py            # full sizes (several minutes)
    python benchmarks/run_all.py --quick    # 10x smaller inputs

The README's Speed section is regenerated from this output.  Each table is the
script of the same name (bench_cast, bench_f32, bench_ops, bench_matmul, bench_scaling) called
with the sizes below; the header gives the core count and the speed of a plain
float64 copy, the floor every elementwise ratio is measured against.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

import bench_cast  # noqa: E402
import bench_f32  # noqa: E402
import bench_matmul  # noqa: E402
import bench_ops  # noqa: E402
import bench_scaling  # noqa: E402
import bench_threads  # noqa: E402
from timing import best  # noqa: E402

import floatfmt as ff  # noqa: E402


def cores():
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return os.cpu_count(), usable


def copy_speed(n=10_000_000, repeat=5):
    x = np.random.default_rng(0).standard_normal(n)
    dst = np.empty_like(x)
    t = best(lambda: np.copyto(dst, x), repeat, warmup=True)
    return t, 2 * x.nbytes / t / 1e9  # read + write


def section(title):
    print(f"\n{'=' * 78}\n{title}\n{'=' * 78}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10x smaller inputs")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    q = 10 if args.quick else 1
    rep = str(args.repeat)
    total, usable = cores()
    t, gbs = copy_speed(10_000_000 // q)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"floatfmt {ff.__version__}, numpy {np.__version__}, Python "
          f"{platform.python_version()}, {platform.machine()}")
    print(f"cores: {total} ({usable} usable by this process); floatfmt threads: "
          f"{ff.get_num_threads()}; load average {load:.1f}")
    print(f"plain copy (np.copyto) of {10_000_000 // q:,} float64: {t * 1e3:.2f} ms, "
          f"{t * 1e9 / (10_000_000 // q):.2f} ns/element, {gbs:.1f} GB/s read+write")
    t0 = time.perf_counter()
    section("cast (bench_cast.py)")
    bench_cast.main(["--n", str(1e7 / q), "--repeat", rep])
    section("float32 in, float32 out, against ml_dtypes and torch (bench_f32.py)")
    bench_f32.main(["--n", str(2 ** 24 // q), "--repeat", rep])
    section("elementwise ops and matmul (bench_ops.py)")
    bench_ops.main(["--n", str(1e6 / q), "--repeat", rep] + (["--size", "128"] if q > 1 else []))
    section("matmul models, fast kernel vs general path (bench_matmul.py)")
    bench_matmul.main(["--repeat", rep] + (["--size", "128"] if q > 1 else []))
    section("block scaling / quantisation (bench_scaling.py)")
    bench_scaling.main(["--n", str(16 * 2 ** 20 // q), "--repeat", rep]
                       + (["--side", "1024", "--gfloat-blocks", "32"] if q > 1 else []))
    section("threads, and the targets of issue 14 (bench_threads.py)")
    bench_threads.main(["--n", str(1e7 / q), "--repeat", rep, "--mem-n", str(3e7 / q)]
                       + (["--size", "128"] if q > 1 else []))
    print(f"\nall tables: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
