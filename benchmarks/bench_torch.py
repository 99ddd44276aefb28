"""floatfmt on torch tensors against the numpy path on the same data (issue 11).

    python benchmarks/bench_torch.py                 # 4M float64 values, one torch thread
    python benchmarks/bench_torch.py --n 1e6 --compile
    python benchmarks/bench_torch.py --kernels       # kernels / bytes / host syncs per call

One float64 array (|x| from about 2**-40 to 2**40, both signs, some zeros) is cast
by ``ff.cast(numpy_array, ...)`` and by ``ff.cast(torch.from_numpy(array), ...)``
(the same memory, CPU, eager mode).  Times are the best of ``--repeat`` runs after a
warm-up, in ns per element.  Columns: numpy; torch as users get it (CPU tensors run
the numpy kernels on views of their memory, ``floatfmt.backend.dispatch``); torch through
the device (namespace) code that CUDA runs, forced on the CPU (``force_namespace``).
Targets: torch / numpy at most 3 for round-to-nearest-even; the directed modes
(toward_zero, up, down) within 1.5x of torch's own RNE (nearest_away and odd are
listed, with numpy's own ratio for reference).  Every torch result is checked equal
to the numpy one.  Then ``ff.matmul(a, b, "bf16", model="h100")`` at 256^3 on
tensors against numpy (target: no slower).  ``--compile``: the namespace kernel under
``torch.compile`` (minutes to compile).  CUDA is timed too when present.  ``--kernels``:
instead, the GPU proxies of ``bench_kernels.py`` (kernels, bytes moved and allocated per
element, host syncs per call of the namespace code, with a CUDA time estimate).
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
from floatfmt.backend.dispatch import force_namespace  # noqa: E402
from timing import best  # noqa: E402

FORMATS = ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"]
MODES = ["nearest_even", "toward_zero", "up", "down", "nearest_away", "odd"]
DIRECTED = ("toward_zero", "up", "down")


def interleaved(fns, repeat):
    """Best time of each function, the calls alternating (one warm-up each), so that a
    change in the machine's load hits every column alike."""
    import time
    for f in fns:
        f()
    best_t = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            f()
            best_t[i] = min(best_t[i], time.perf_counter() - t)
    return best_t


def matmul_ratio(repeat):
    """ff.matmul(a, b, "bf16", model="h100") at 256^3: tensors against numpy."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    want = ff.matmul(a, b, "bf16", model="h100")
    got = ff.matmul(ta, tb, "bf16", model="h100")
    assert isinstance(got, torch.Tensor) and np.array_equal(got.numpy(), want)
    tn, tt = interleaved([lambda: ff.matmul(a, b, "bf16", model="h100"),
                          lambda: ff.matmul(ta, tb, "bf16", model="h100")], repeat + 2)
    print(f"matmul bf16 h100 256^3: numpy {tn * 1e3:.1f} ms, torch {tt * 1e3:.1f} ms, "
          f"ratio {tt / tn:.2f} (target <= 1): {'met' if tt <= tn * 1.05 else 'MISSED'}")


def compiled_ratio(x, t, repeat):
    """The namespace kernel (what CUDA runs) for bf16 RNE under torch.compile, on CPU."""
    from floatfmt.core.formats import get_format
    from floatfmt.backend.namespace import namespace
    from floatfmt.core.rounding import _general_chunk
    f, xp = get_format("bf16"), namespace(t)

    def kernel(v):
        return _general_chunk(v, None, f, "nearest_even", "inf", False, None, None, None, xp)

    kernel(t[:8])  # fills the Format's cached properties first (dynamo cannot enter their lock)
    try:
        c = torch.compile(kernel, fullgraph=True)  # one graph: the routine reads nothing back
        got = c(t)
    except Exception as e:  # report, do not fail: compile support varies by machine
        print(f"torch.compile: not available here ({type(e).__name__}: {str(e)[:120]})")
        return
    assert np.array_equal(got.numpy(), ff.cast(x, "bf16"), equal_nan=True)
    tc = best(lambda: c(t), repeat, warmup=True)
    tn = best(lambda: ff.cast(x, "bf16"), repeat, warmup=True)
    print(f"torch.compile (namespace kernel, bf16 RNE): {tc / x.size * 1e9:.2f} ns/el, "
          f"ratio to numpy {tc / tn:.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=float, default=4e6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--compile", action="store_true", help="also time the torch.compile'd kernel")
    ap.add_argument("--kernels", action="store_true",
                    help="count kernels / bytes / host syncs instead (bench_kernels.py)")
    a, rest = ap.parse_known_args()
    if a.kernels:
        import bench_kernels
        bench_kernels.main(rest + ["--time-n", str(a.n), "--repeat", str(a.repeat)])
        return
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    n = int(a.n)
    if a.threads:
        torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
    x[::97] = 0.0
    t = torch.from_numpy(x)
    print(f"{n} float64 values; numpy {np.__version__}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), {platform.processor() or platform.machine()}")
    print(f"{'format':10s} {'mode':13s} {'numpy':>8s} {'torch':>8s} {'ratio':>6s} "
          f"{'device':>8s} {'ratio':>6s}   (ns/element; device = namespace code on CPU)")
    worst_rne, worst_dir, worst_ns, worst_dir_np = 0.0, 0.0, 0.0, 0.0
    for fmt in FORMATS:
        rne_torch = None
        for mode in MODES:
            want = ff.cast(x, fmt, mode)
            got = ff.cast(t, fmt, mode).numpy()
            assert np.array_equal(got, want, equal_nan=True), (fmt, mode)
            with force_namespace():
                assert np.array_equal(ff.cast(t, fmt, mode).numpy(), want, equal_nan=True)
            def forced():
                with force_namespace():
                    ff.cast(t, fmt, mode)
            tn, tt, td = interleaved([lambda: ff.cast(x, fmt, mode), lambda: ff.cast(t, fmt, mode),
                                      forced], a.repeat)
            r = tt / tn
            if mode == "nearest_even":
                rne_torch, rne_numpy, worst_rne = tt, tn, max(worst_rne, r)
            elif mode in DIRECTED:
                worst_dir = max(worst_dir, tt / rne_torch)
                worst_dir_np = max(worst_dir_np, tn / rne_numpy)
            worst_ns = max(worst_ns, td / tn)
            print(f"{fmt:10s} {mode:13s} {tn / n * 1e9:8.2f} {tt / n * 1e9:8.2f} {r:6.2f} "
                  f"{td / n * 1e9:8.2f} {td / tn:6.2f}")
    print(f"\nRNE torch/numpy worst ratio {worst_rne:.2f} (target <= 3): "
          f"{'met' if worst_rne <= 3 else 'MISSED'}")
    print(f"directed (toward_zero/up/down) vs torch RNE worst ratio {worst_dir:.2f} "
          f"(target <= 1.5): {'met' if worst_dir <= 1.5 else 'MISSED'}; numpy's own: "
          f"{worst_dir_np:.2f}")
    print(f"device (namespace) code on CPU vs numpy, worst ratio {worst_ns:.2f} (no target)")
    matmul_ratio(a.repeat)
    if a.compile:
        compiled_ratio(x, t, a.repeat)
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
