"""Speed of the arithmetic layer against numpy's own float64 operations.

    python benchmarks/bench_ops.py             # 1 million elements, 256^3 matmul
    python benchmarks/bench_ops.py --n 1e5     # quicker

* ``ff.add`` / ``ff.mul`` / ``ff.fma`` on N elements in bf16 and fp8_e4m3, against
  numpy's float64 ``a + b``, ``a * b`` and ``a * b + c``.  The operands are float64
  arrays whose values are already in the format, so ``ff`` checks that (bit test,
  no rounding), computes the exact result and rounds it once.  ``FPArray +`` is the
  same addition on FPArrays, whose values are known to be in the format.
  Target: within 15x of numpy.
* ``ff.matmul`` of 256 x 256 by 256 x 256 in bf16 with fp32 sequential accumulation
  (target under 1 s) and with ``model="h100"`` (target under 3 s), against
  ``numpy.matmul`` of the same float64 arrays.

Times are the best of ``--repeat`` runs.  The targets are checked at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import floatfmt as ff  # noqa: E402
from timing import best  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e6, help="elements for the elementwise ops")
    ap.add_argument("--size", type=int, default=256, help="matmul size (size^3)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    n = int(args.n)
    rng = np.random.default_rng(0)
    print(f"floatfmt {ff.__version__}, numpy {np.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}")
    rows = []
    ratios = []
    for fmt in ("bf16", "fp8_e4m3"):
        a, b, c = (ff.cast(rng.standard_normal(n) * 4, fmt, overflow="saturate") for _ in range(3))
        cases = [
            ("add", lambda: ff.add(a, b, fmt), lambda: a + b),
            ("mul", lambda: ff.mul(a, b, fmt), lambda: a * b),
            ("fma", lambda: ff.fma(a, b, c, fmt), lambda: a * b + c),
        ]
        for name, ours, theirs in cases:
            t_ff = best(ours, args.repeat)
            t_np = best(theirs, args.repeat)
            ratios.append(t_ff / t_np)
            rows.append((f"ff.{name} {fmt}", n, t_ff, t_np, t_ff / t_np))
        # the same through FPArrays, whose values are known to be in the format (no check)
        x, y = ff.array(a, fmt), ff.array(b, fmt)
        t_ff = best(lambda: x + y, args.repeat)
        t_np = best(lambda: a + b, args.repeat)
        rows.append((f"FPArray + {fmt}", n, t_ff, t_np, t_ff / t_np))
    s = args.size
    A, B = rng.standard_normal((s, s)), rng.standard_normal((s, s))
    t_np = best(lambda: A @ B, args.repeat)
    t_seq = best(lambda: ff.matmul(A, B, "bf16", acc_fmt="fp32"), args.repeat)
    t_h100 = best(lambda: ff.matmul(A, B, "bf16", model="h100"), args.repeat)
    rows.append((f"ff.matmul bf16 fp32 seq {s}^3", s ** 3, t_seq, t_np, t_seq / t_np))
    rows.append((f"ff.matmul bf16 h100 {s}^3", s ** 3, t_h100, t_np, t_h100 / t_np))

    head = f"| {'operation':<30} | {'elements':>10} | {'floatfmt':>10} | {'numpy f64':>10} | {'ratio':>7} |"
    print(head)
    print("|" + "|".join("-" * (len(x)) for x in head.split("|")[1:-1]) + "|")
    for name, count, t1, t2, r in rows:
        print(f"| {name:<30} | {count:>10,} | {t1 * 1e3:>8.1f}ms | {t2 * 1e3:>8.2f}ms | {r:>6.1f}x |")
    print()
    ok_elem = max(ratios) <= 15
    print(f"elementwise within 15x of numpy: {'met' if ok_elem else 'MISSED'} "
          f"(worst {max(ratios):.1f}x)")
    if s == 256:
        print(f"matmul 256^3 bf16 fp32 sequential under 1 s: {'met' if t_seq < 1 else 'MISSED'} "
              f"({t_seq:.2f} s)")
        print(f"matmul 256^3 bf16 model='h100' under 3 s: {'met' if t_h100 < 3 else 'MISSED'} "
              f"({t_h100:.2f} s)")


if __name__ == "__main__":
    main()
