"""What the namespace (device) code costs a GPU: kernels, bytes and host syncs per call.

    python benchmarks/bench_kernels.py               # casts, 2**18 values, + matmul 256^3, 512^3
    python benchmarks/bench_kernels.py --no-matmul --n 65536
    python benchmarks/bench_torch.py --kernels       # the same tables

On a GPU elementwise code is bound by memory traffic and kernel launches, so these
are the proxies: every aten op that ``ff.cast`` (or ``ff.matmul(..., model="h100")``)
runs under ``floatfmt.backend.dispatch.force_namespace`` on a CPU tensor is seen by a
``TorchDispatchMode`` (``KernelCounter``) and classed as

* a kernel (an op that computes: one launch on a GPU), with the bytes it reads and
  writes (a broadcast operand counts its distinct elements) and the bytes it allocates
  (outputs that are not views or in-place results);
* a view / metadata op (no launch): views, ``detach``, ``empty*``, ``scalar_tensor``
  (a Python number wrapped for an op: a host value, not a device kernel);
* a host sync: ``_local_scalar_dense`` (``bool(t)``, ``t.item()``, ``int(t)``), which
  stalls a GPU until its queue drains.

The cast tables use at most ``rounding._TORCH_CHUNK`` values, so that the CPU tensor
takes the namespace code in one call as a CUDA tensor of any size does (bigger CPU
tensors are chunked).  Columns: kernels and syncs per call, bytes moved (read + write)
and allocated per element, and the wall time per element of the forced namespace code
and of the numpy path on the same data (4M values, ``--time-n``).  ``estimate``: the
time a CUDA device would take per element, ``kernels * launch + traffic / bandwidth``
for 4M values (``--bw`` bytes/s, ``--launch`` seconds; launches overlap with the
kernels when the kernels are longer, so the larger of the two per kernel is taken).
The matmul section counts the same for ``ff.matmul(a, b, "bf16", model="h100")`` at
256^3 and 512^3, per K step (L = 16 products), and extrapolates to 4096^3.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import floatfmt as ff  # noqa: E402
from floatfmt.backend.dispatch import force_namespace  # noqa: E402

FORMATS = ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "int8"]
MODES = ["nearest_even", "toward_zero", "up", "down", "nearest_away", "odd", "stochastic"]
_NO_KERNEL = {"scalar_tensor", "detach", "empty", "empty_like", "empty_strided", "new_empty", "alias",
              "lift_fresh", "_unsafe_view", "new_empty_strided"}
_SYNC = {"_local_scalar_dense"}


def _distinct_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements of t (a broadcast axis, stride 0, counts once)."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return n * t.element_size()


def _tensors(v):
    if isinstance(v, torch.Tensor):
        yield v
    elif isinstance(v, (list, tuple)):
        for w in v:
            yield from _tensors(w)
    elif isinstance(v, dict):
        for w in v.values():
            yield from _tensors(w)


class KernelCounter(TorchDispatchMode):
    """Counts the aten ops run inside it: kernels, bytes read / written / allocated,
    host syncs (see the module docstring); ``ops`` counts kernels by name."""

    def __init__(self):
        super().__init__()
        self.kernels = self.syncs = self.views = 0
        self.read = self.written = self.allocated = 0
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name in _SYNC:
            self.syncs += 1
            return out
        if func.is_view or name in _NO_KERNEL:
            self.views += 1
            return out
        self.kernels += 1
        self.ops[name] += 1
        ins = list(_tensors(args)) + list(_tensors(kwargs))
        self.read += sum(_distinct_bytes(t) for t in ins)
        inplace = func._schema.returns and func._schema.returns[0].alias_info is not None
        for t in _tensors(out):
            self.written += _distinct_bytes(t)
            if not inplace:
                self.allocated += _distinct_bytes(t)
        return out


def count(fn) -> KernelCounter:
    c = KernelCounter()
    with force_namespace(), c:
        fn()
    return c


def data(n: int, dtype=torch.float64, seed: int = 0) -> torch.Tensor:
    """bench_torch.py's data: |x| from about 2**-40 to 2**40, both signs, some zeros."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
    x[::97] = 0.0
    return torch.from_numpy(x).to(dtype)


def best(fn, repeat):
    fn()
    t = float("inf")
    for _ in range(repeat):
        s = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - s)
    return t


def estimate(c: KernelCounter, n_counted: int, n: int, bw: float, launch: float) -> float:
    """Seconds for n elements on a GPU: per kernel the larger of one launch and its share
    of the traffic (the counted traffic scaled to n)."""
    per_kernel = (c.read + c.written) / max(c.kernels, 1) * n / n_counted / bw
    return c.kernels * max(launch, per_kernel) + c.syncs * launch


def cast_table(a) -> None:
    n, tn = a.n, int(a.time_n)
    g = torch.Generator().manual_seed(0)
    print(f"ff.cast under force_namespace: kernels, syncs per call ({n} values, one call as on "
          f"CUDA); bytes per element; times on {tn} values (ns/el); CUDA estimate for {tn} "
          f"values at {a.bw / 1e12:.1f} TB/s, {a.launch * 1e6:.0f} us/launch")
    print(f"{'input':7s} {'format':9s} {'mode':13s} {'kern':>5s} {'sync':>4s} {'traffic':>8s} "
          f"{'alloc':>6s} {'ns/el':>7s} {'numpy':>6s} {'ratio':>6s} {'cuda ns':>8s} "
          f"{'np/cuda':>7s}")
    for dtype in (torch.float64, torch.float32):
        for fmt in a.formats:
            for mode in a.modes:
                if fmt == "int8" and mode == "odd":
                    continue
                x = data(n, dtype)
                kw = dict(rng=g) if mode == "stochastic" else {}
                c = count(lambda: ff.cast(x, fmt, mode, **kw))
                line = (f"{str(dtype)[6:]:7s} {fmt:9s} {mode:13s} {c.kernels:5d} {c.syncs:4d} "
                        f"{(c.read + c.written) / n:8.0f} {c.allocated / n:6.0f}")
                if tn:
                    xt = data(tn, dtype)
                    xn = xt.numpy()

                    def forced():
                        with force_namespace():
                            ff.cast(xt, fmt, mode, **kw)
                    td = best(forced, a.repeat)
                    tnp = best(lambda: ff.cast(xn, fmt, mode), a.repeat)
                    est = estimate(c, n, tn, a.bw, a.launch)
                    line += (f" {td / tn * 1e9:7.2f} {tnp / tn * 1e9:6.2f} {td / tnp:6.2f} "
                             f"{est / tn * 1e9:8.3f} {tnp / est:7.1f}")
                print(line)
                if a.ops:
                    print("   ", dict(c.ops.most_common()))


def matmul_table(a) -> None:
    print("\nff.matmul(a, b, 'bf16', model='h100') under force_namespace (L = 16: K / 16 steps)")
    rows = []
    for s in a.matmul_sizes:
        rng = np.random.default_rng(1)
        x = torch.from_numpy(rng.standard_normal((s, s)))
        y = torch.from_numpy(rng.standard_normal((s, s)))
        c = count(lambda: ff.matmul(x, y, "bf16", model="h100"))
        with force_namespace():
            t = best(lambda: ff.matmul(x, y, "bf16", model="h100"), 1)
        steps = -(-s // 16)
        # CPU tiles: rounding.tile_terms: 2**20 products per step call
        calls = steps * -(-s // max(1, (1 << 20) // (s * 16)))
        rows.append((s, c, t, calls))
        print(f"{s}^3: {c.kernels} kernels, {c.syncs} syncs, {(c.read + c.written) / 2**20:.0f} MiB "
              f"moved, {c.allocated / 2**20:.0f} MiB allocated; {calls} step calls: "
              f"{c.kernels / calls:.1f} kernels, {c.syncs / calls:.2f} syncs and "
              f"{(c.read + c.written) / (calls * min(1 << 20, s * s * 16)):.0f} bytes per product "
              f"per step call; {t:.2f} s on this CPU")
        if a.ops:
            print("   ", dict(c.ops.most_common()))
    s, c, _, calls = rows[-1]
    products = s * s * 16  # per step over the whole output (CPU: split into row tiles)
    k_step = c.kernels / calls
    sync_step = c.syncs / calls
    traffic_per_product = (c.read + c.written) / (calls * min(1 << 20, products))
    # 4096^3 on CUDA: gemm.tile_terms = 2**26 products per step call
    n = 4096
    tile = 1 << 26
    calls_gpu = (n // 16) * (n * n * 16 // tile)
    t_bw = calls_gpu * tile * traffic_per_product / a.bw
    t_launch = calls_gpu * (k_step + sync_step) * a.launch
    per_kernel = tile * traffic_per_product / max(k_step, 1) / a.bw
    t = calls_gpu * k_step * max(a.launch, per_kernel) + calls_gpu * sync_step * a.launch
    print(f"4096^3 on CUDA (estimate): {calls_gpu} step calls of {tile} products, "
          f"{k_step:.0f} kernels and {sync_step:.1f} syncs each: traffic {t_bw:.1f} s at "
          f"{a.bw / 1e12:.1f} TB/s, launches {t_launch:.2f} s -> about {t:.1f} s "
          f"(target < 10 s)")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 18, help="values counted (<= _TORCH_CHUNK)")
    ap.add_argument("--time-n", type=float, default=4e6, help="values timed (0: no timing)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bw", type=float, default=4.0e12, help="GPU memory bandwidth, bytes/s")
    ap.add_argument("--launch", type=float, default=10e-6, help="seconds per kernel launch")
    ap.add_argument("--formats", nargs="*", default=list(FORMATS))
    ap.add_argument("--modes", nargs="*", default=list(MODES))
    ap.add_argument("--matmul-sizes", nargs="*", type=int, default=[256, 512])
    ap.add_argument("--no-cast", action="store_true")
    ap.add_argument("--no-matmul", action="store_true")
    ap.add_argument("--ops", action="store_true", help="list the kernels by name")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if not a.no_cast:
        cast_table(a)
    if not a.no_matmul:
        matmul_table(a)


if __name__ == "__main__":
    main()
