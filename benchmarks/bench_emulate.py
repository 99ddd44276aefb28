"""An emulated training step against plain torch, and gemm="fast" against "exact" (issues 23, 24).

    python benchmarks/bench_emulate.py            # the tests' three models + a wider transformer
    python benchmarks/bench_emulate.py --quick    # the tests' models only

For each model: the time of one training step (forward, a fixed projection loss,
backward) in plain torch float32, emulated under ``bf16`` (``gemm="exact"``: the H100
matrix-unit model) and under ``bf16`` with ``gemm="fast"`` (the same bf16 operands,
float32 BLAS sums, the same epilogue and rounding), best of ``--repeat`` runs after a
warm-up, with ``--threads`` threads (1 by default) for torch and floatfmt alike; the
exact step twice, on numpy's matrix-unit kernel and on the compiled fused one
(``ff.matmul_kernel("compiled")``, whose warm-up compiles; its bits are checked equal);
the ratios to plain torch in the same run.  Then how far
fast is from exact: over the output and every parameter gradient of one step (all of
them bf16 values), the distance in bf16 ulps (units in the last place: the number of
bf16 values between the two results), max and median, the share that differ, and
the largest difference relative to its tensor's largest magnitude (the ResNet's stem
bias feeds a BatchNorm, so its gradient is zero up to rounding noise: its ulps and
relative difference are that noise's, summed in another order).
Targets (issue 24): fast within 3x plain torch; exact (the fused matrix-unit kernel) within
50x plain torch for the wider transformer (times: wall clock, one run of the exact step).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import torch  # noqa: E402

import floatfmt as ff  # noqa: E402
import floatfmt.torch as fft  # noqa: E402
from test_emulate_ops import PreNormTransformer, models, training_step  # noqa: E402


def step_time(model, x, repeat):
    best_t = float("inf")
    training_step(model, x)
    for _ in range(repeat):
        model.zero_grad()
        t = time.perf_counter()
        training_step(model, x)
        best_t = min(best_t, time.perf_counter() - t)
    return best_t


def results(model, x, recipe, kernel="numpy"):
    model.zero_grad()
    with fft.emulating(model, recipe), ff.matmul_kernel(kernel):
        y = training_step(model, x)
    return [y.detach()] + [p.grad.clone() for p in model.parameters() if p.grad is not None]


def bf16_order(a):
    """bf16 values (in float32) as integers in the order of the values (ulp steps)."""
    bits = np.ascontiguousarray(a, np.float32).view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits) // 65536


def ulps(exact, fast):
    """Max and median bf16 ulps apart, the share that differ, and the largest difference
    relative to the largest magnitude of its tensor (near-zero results of cancelling
    sums are many ulps apart and tiny against the tensor)."""
    d = np.concatenate([np.abs(bf16_order(e.numpy()) - bf16_order(f.numpy())).ravel()
                        for e, f in zip(exact, fast)])
    rel = max(float((e - f).abs().max() / e.abs().max().clamp_min(1e-30)) for e, f in zip(exact, fast))
    return int(d.max()), float(np.median(d)), float((d > 0).mean()), rel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch's and floatfmt's threads (the same count for both)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ff.set_num_threads(args.threads)
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{args.threads} thread(s) for torch and floatfmt")
    cases = dict(models())
    if not args.quick:
        torch.manual_seed(4)
        cases["transformer e=128 t=64"] = (PreNormTransformer(e=128, h=4, f=512, vocab=64),
                                           torch.randn(4, 64, 64))
    fast = fft.get_recipe("bf16").replace(name="bf16_fast", gemm="fast")
    print(f"{'model':24s} {'plain s':>9s} {'exact s':>9s} {'compiled':>9s} {'fast s':>9s} "
          f"{'exact/plain':>12s} {'compiled/plain':>15s} {'fast/plain':>11s} {'max ulp':>8s} "
          f"{'median':>7s} {'differ':>7s} {'max rel':>8s}")
    for name, (model, x) in cases.items():
        plain = step_time(model, x, args.repeat)
        with fft.emulating(model, "bf16"):
            exact = step_time(model, x, 1 if "e=128" in name else args.repeat)
        with fft.emulating(model, "bf16"), ff.matmul_kernel("compiled"):
            compiled = step_time(model, x, args.repeat)  # the warm-up compiles
        with fft.emulating(model, fast):
            quick = step_time(model, x, args.repeat)
        same = all(torch.equal(p, q) for p, q in zip(results(model, x, "bf16"),
                                                       results(model, x, "bf16", "compiled")))
        mx, med, share, rel = ulps(results(model, x, "bf16"), results(model, x, fast))
        print(f"{name:24s} {plain:9.4f} {exact:9.3f} {compiled:9.3f} {quick:9.4f} "
              f"{exact / plain:12.0f} {compiled / plain:15.0f} {quick / plain:11.1f} {mx:8d} "
              f"{med:7.1f} {100 * share:6.2f}% {rel:8.1e}" + ("" if same else "  COMPILED BITS DIFFER"))
        if "e=128" in name:
            print(f"exact within 50x plain torch ({name}): numpy kernel "
                  f"{'met' if exact <= 50 * plain else 'MISSED'} ({exact / plain:.0f}x), "
                  f"compiled kernel {'met' if compiled <= 50 * plain else 'MISSED'} "
                  f"({compiled / plain:.0f}x); fast within 3x: "
                  f"{'met' if quick <= 3 * plain else 'MISSED'} ({quick / plain:.1f}x)")


if __name__ == "__main__":
    main()
