"""ff.cast on a torch tensor against the numpy path on the same data (issue 11).

    python benchmarks/bench_torch.py              # 4M float64 values
    python benchmarks/bench_torch.py --n 1e6 --threads 1

One float64 array (|x| from about 2**-40 to 2**40, both signs, some zeros) is cast
by ``ff.cast(numpy_array, ...)`` and by ``ff.cast(torch.from_numpy(array), ...)``
(the same memory, CPU, eager mode).  Times are the best of ``--repeat`` runs after a
warm-up, in ns per element; the ratio is torch / numpy (target: at most 3 for
round-to-nearest-even, and directed modes within 1.5x of torch's own RNE).  Every
torch result is checked equal to the numpy one.  CUDA is timed too when present.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import floatfmt as ff  # noqa: E402
from timing import best  # noqa: E402

FORMATS = ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"]
MODES = ["nearest_even", "toward_zero", "up", "down", "nearest_away", "odd"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=float, default=4e6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = ap.parse_args()
    n = int(a.n)
    if a.threads:
        torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
    x[::97] = 0.0
    t = torch.from_numpy(x)
    print(f"{n} float64 values; numpy {np.__version__}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), {platform.processor() or platform.machine()}")
    print(f"{'format':10s} {'mode':13s} {'numpy ns/el':>12s} {'torch ns/el':>12s} {'ratio':>6s}")
    worst_rne, worst_dir = 0.0, 0.0
    for fmt in FORMATS:
        rne_torch = None
        for mode in MODES:
            want = ff.cast(x, fmt, mode)
            got = ff.cast(t, fmt, mode).numpy()
            assert np.array_equal(got, want, equal_nan=True), (fmt, mode)
            tn = best(lambda: ff.cast(x, fmt, mode), a.repeat, warmup=True)
            tt = best(lambda: ff.cast(t, fmt, mode), a.repeat, warmup=True)
            r = tt / tn
            if mode == "nearest_even":
                rne_torch, worst_rne = tt, max(worst_rne, r)
            else:
                worst_dir = max(worst_dir, tt / rne_torch)
            print(f"{fmt:10s} {mode:13s} {tn / n * 1e9:12.2f} {tt / n * 1e9:12.2f} {r:6.2f}")
    print(f"\nRNE torch/numpy worst ratio {worst_rne:.2f} (target <= 3): "
          f"{'met' if worst_rne <= 3 else 'MISSED'}")
    print(f"directed/odd/away vs torch RNE worst ratio {worst_dir:.2f} (target <= 1.5): "
          f"{'met' if worst_dir <= 1.5 else 'MISSED'}")
    if torch.cuda.is_available():
        tc = t.cuda()
        for fmt in FORMATS:
            ff.cast(tc, fmt)
            torch.cuda.synchronize()

            def run():
                ff.cast(tc, fmt)
                torch.cuda.synchronize()
            tg = best(run, a.repeat, warmup=True)
            tn = best(lambda: ff.cast(x, fmt), a.repeat)
            print(f"CUDA {fmt:10s} {tg / n * 1e9:8.3f} ns/el, numpy/cuda = {tn / tg:7.1f}x "
                  f"(target >= 100x)")


if __name__ == "__main__":
    main()
