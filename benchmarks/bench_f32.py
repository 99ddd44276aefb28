"""float32 in, float32 out (issue 24 item 1): ff.cast of float32 against the round trips
of ml_dtypes and torch, on 1 thread and on 2.

    python benchmarks/bench_f32.py              # 2**24 float32 values
    python benchmarks/bench_f32.py --n 1e6      # quicker

The values: standard normal float32 (as weights and activations are), some exact zeros.
For bf16, fp16, fp8_e4m3 and fp4_e2m1, in ns per element (best of ``--repeat`` after a
warm-up):

* ``ff.cast(x, fmt)`` on the numpy array and on a CPU tensor (``torch.from_numpy``),
  round to nearest even; the directed modes (toward_zero, up, down) as multiples of it;
* "before": the same casts by the general route (``floatfmt.core.round_f32`` switched off: the
  array widened to float64, rounded, narrowed), as floatfmt did before issue 24;
* ml_dtypes ``x.astype(T).astype(np.float32)`` (numpy's float16 for fp16);
* torch ``t.to(D).to(torch.float32)`` (no fp4 dtype that converts: "-").

Threads: floatfmt through ``ff.limit_threads(n)``, torch through ``torch.set_num_threads(n)``;
ml_dtypes and numpy's casts have one thread only.  The machine is shared: the load average
is printed.  Targets (issue 24): RNE no slower than ml_dtypes and torch; directed <= 1.5x RNE.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ml_dtypes as md  # noqa: E402

import floatfmt as ff  # noqa: E402
from timing import best  # noqa: E402

_cast = importlib.import_module("floatfmt.core.cast")

FORMATS = {"bf16": (md.bfloat16, "bfloat16"), "fp16": (np.float16, "float16"),
           "fp8_e4m3": (md.float8_e4m3fn, "float8_e4m3fn"), "fp4_e2m1": (md.float4_e2m1fn, None)}
DIRECTED = ("toward_zero", "up", "down")


def data(n: int) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x[::1000] = 0.0
    return x


@contextlib.contextmanager
def general_route():
    """ff.cast as before round_f32: the whole array widened to float64 and back."""
    old = _cast.cast_float32
    _cast.cast_float32 = lambda *a, **k: None
    try:
        yield
    finally:
        _cast.cast_float32 = old


def measure(x, threads: int, repeat: int, torch=None) -> dict:
    """ns per element of every row for one thread count."""
    ns = 1e9 / x.size
    t = torch.from_numpy(x) if torch is not None else None
    if torch is not None:
        torch.set_num_threads(threads)
    rows = {}
    with ff.limit_threads(threads):
        for name, (dt, tname) in FORMATS.items():
            row = {"numpy": best(lambda: ff.cast(x, name), repeat, warmup=True) * ns}
            for m in DIRECTED:
                row[m] = best(lambda: ff.cast(x, name, m), repeat, warmup=True) * ns
            if t is not None:
                row["tensor"] = best(lambda: ff.cast(t, name), repeat, warmup=True) * ns
            with general_route():
                row["before"] = best(lambda: ff.cast(x, name), repeat, warmup=True) * ns
                if t is not None:
                    row["before_t"] = best(lambda: ff.cast(t, name), repeat, warmup=True) * ns
            with np.errstate(all="ignore"):
                row["ml_dtypes"] = best(lambda: x.astype(dt).astype(np.float32), repeat,
                                        warmup=True) * ns
            if t is not None and tname is not None:
                D = getattr(torch, tname)
                row["torch"] = best(lambda: t.to(D).to(torch.float32), repeat, warmup=True) * ns
            rows[name] = row
    return rows


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=2 ** 24, help="float32 values (default 2**24)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    x = data(int(args.n))
    print(f"floatfmt {ff.__version__}, numpy {np.__version__}, ml_dtypes {md.__version__}, "
          f"torch {torch.__version__ if torch else '-'}, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"{x.size:,} standard normal float32 values; ns per element, best of {args.repeat}; "
          "RTZ / up / down as multiples of RNE\n")
    print("numpy / tensor: ff.cast now; before: the general route (float64 and back), the same "
          "run\n")
    head = (f"{'threads':<8}{'format':<10}{'numpy':>8}{'tensor':>8}{'before':>8}{'before_t':>9}"
            f"{'RTZ':>6}{'up':>6}{'down':>6}"
            f"{'ml_dtypes':>11}{'torch':>8}{'ml/ff':>7}{'torch/ff':>9}")
    print(head)
    print("-" * len(head))
    misses = []
    for n in args.threads:
        rows = measure(x, n, args.repeat, torch)
        for name, r in rows.items():
            rne = r["numpy"]
            tt = r.get("torch")
            print(f"{n:<8}{name:<10}{rne:>8.2f}{r.get('tensor', float('nan')):>8.2f}"
                  f"{r['before']:>8.2f}{r.get('before_t', float('nan')):>9.2f}"
                  + "".join(f"{r[m] / rne:>6.2f}" for m in DIRECTED)
                  + f"{r['ml_dtypes']:>11.2f}" + (f"{tt:>8.2f}" if tt else f"{'-':>8}")
                  + f"{r['ml_dtypes'] / rne:>7.2f}" + (f"{tt / rne:>9.2f}" if tt else f"{'-':>9}"))
            if rne > r["ml_dtypes"]:
                misses.append(f"{n} thread(s) {name}: RNE {rne:.2f} ns slower than ml_dtypes "
                              f"{r['ml_dtypes']:.2f}")
            if tt and rne > tt:
                misses.append(f"{n} thread(s) {name}: RNE {rne:.2f} ns slower than torch {tt:.2f}")
            for m in DIRECTED:
                if r[m] > 1.5 * rne:
                    misses.append(f"{n} thread(s) {name}: {m} {r[m] / rne:.2f}x RNE (target 1.5x)")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    print("targets: " + ("all met" if not misses else "MISSED:\n  " + "\n  ".join(misses)))
    return misses


if __name__ == "__main__":
    main()
