"""Prototype (monkeypatched, tensorcore_device.py unchanged): a cheaper T-FDPA step, checked equal to
the numpy path and counted (python benchmarks/proto_tensorcore_step.py).  Proposed to devtcsr
(the owner of tensorcore_device.py) in /work/wt/FINDINGS.md."""
import sys

import numpy as np
import torch
sys.path.insert(0, "benchmarks"); sys.path.insert(0, ".")
import floatfmt as ff
import floatfmt.tensorcore_device as td
from floatfmt.dispatch import force_namespace
from floatfmt.rounding import round_values
from bench_kernels import count
torch.set_num_threads(1)
ZERO_E = -(1 << 40)  # exponent of a zero operand: a zero product never sets e_max

def truncated_sum(P, scale, xp):
    """sum over axis 0 of P truncated toward zero to multiples of 2**-scale: the integers summed
    (exact, below 2**53) and scaled once."""
    p = xp.pow2_normal(scale)
    ints = round_values(P * p, td._ALIGNED, "toward_zero", "saturate").sum(0)
    return ints * ((2046 << 52) - p.view(torch.int64)).view(torch.float64)  # 2**-scale

def fused(P, EP, acc, m, cfmt, ofmt, xp):
    t = xp.t
    zero = t.zeros((), dtype=acc.dtype, device=acc.device)
    total = P.sum(0) + acc
    special = ~t.isfinite(total)
    fin = t.isfinite(acc)
    cv = t.where(fin, acc, zero)
    ec = t.where(cv != 0, td._exponents(cv, cfmt, t), m.zero_exponent)
    e_max = t.maximum(t.clamp(EP.amax(0), min=m.zero_exponent), ec)  # zero operands: ZERO_E
    scale = m.F - e_max
    val = truncated_sum(P, scale, xp) + truncated_sum(cv[None], scale, xp)
    r = round_values(val, ofmt, m.rounding, "inf" if ofmt.inf else "saturate")
    if m.overflow == "inf":
        big = val.abs() >= 2.0 ** (ofmt.emax + 1)
        r = t.where(big, t.copysign(t.full_like(val, float("inf")), val), r)
    else:
        r = t.clamp(r, -ofmt.max, ofmt.max)
    r = t.where(val == 0, zero, r)
    return t.where(special, t.where(t.isnan(total), float("nan"), total), r)

orig_exponents = td._exponents
def exponents(v, fmt, t):  # operands' exponents, zeros marked (only _chain calls it on operands)
    return t.where(v == 0, ZERO_E, orig_exponents(v, fmt, t))

def data(shape, rng, specials):
    v = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))
    v[rng.random(shape) < 0.1] = 0.0
    if specials:
        flat = v.reshape(-1)
        idx = rng.choice(flat.size, 6, replace=False)
        flat[idx] = [np.inf, -np.inf, np.nan, 1e300, -1e300, 3e38]
    return v

models = [n for n in ff.tensorcore_models() if n.split("/")[0] in ("v100","t4","a100","ada","h100","b200") and "int8" not in n and "mx" not in n and "nvfp4" not in n]
rng = np.random.default_rng(7)
bad = 0; cases = 0
for name in models:
    fmt = name.split("/")[1]
    for (M, K, N, sp) in [(8, 40, 6, False), (5, 33, 7, True), (16, 64, 16, False)]:
        a, b = data((M, K), rng, sp), data((K, N), rng, sp)
        want = ff.matmul(a, b, fmt, model=name)
        with force_namespace():
            base = ff.matmul(torch.from_numpy(a), torch.from_numpy(b), fmt, model=name).numpy()
            saved = (td._fused, td._exponents)
            td._fused, td._exponents = fused, exponents
            try:
                got = ff.matmul(torch.from_numpy(a), torch.from_numpy(b), fmt, model=name).numpy()
            finally:
                td._fused, td._exponents = saved
        for g in (base, got):
            m = ~((g.view(np.int64) == want.view(np.int64)) | (np.isnan(g) & np.isnan(want)))
            bad += int(m.sum())
        cases += 1
print(f"{cases} matmuls over {len(models)} NVIDIA models: {bad} mismatches (baseline and prototype vs numpy)")
x = torch.from_numpy(rng.standard_normal((256, 256))); y = torch.from_numpy(rng.standard_normal((256, 256)))
c0 = count(lambda: ff.matmul(x, y, "bf16", model="h100"))
td._fused, td._exponents = fused, exponents
c1 = count(lambda: ff.matmul(x, y, "bf16", model="h100"))
n = 256 * 256 * 256
print(f"256^3 h100 bf16: now {c0.kernels / 16:.1f} kernels/step, {(c0.read + c0.written) / n:.0f} B/product; "
      f"prototype {c1.kernels / 16:.1f} kernels/step, {(c1.read + c1.written) / n:.0f} B/product")
print(dict(c1.ops.most_common()))
