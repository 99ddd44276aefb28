"""Inputs of the GPU checks, built the same way on the GPU machine and on the CPU.

Pure numpy and floatfmt (no torch), so the capture (``capture.py``) and the
replay (``compare.py``) build identical inputs and a fixture stores only what
cannot be recomputed:

- ``structured_cast_inputs(target)``: the float32 bit patterns that decide a
  cast to ``target``: every target value, its neighbours' midpoints, both
  +- 1 float32 ulp, the overflow threshold, zeros, infinities, NaN payloads.
- ``tf32_operand_values()``: float32 operands that tell truncation, round to
  nearest even and round to nearest away apart when a GPU reads them as TF32.
- ``gemm_probes(fmt, k, block)``: one dot product per probe (vector ``a``,
  vector ``b``) that isolates one parameter of the tensor-core model.
- ``promotion_probes(fmt, k, positions)``: FP8 probes for the interval at
  which cuBLAS promotes partial sums into fp32.
- ``random_operands(seed, fmt, m, k, n)``: operand codes drawn from PCG64's
  raw output (defined by the algorithm, so stable across numpy versions).
- ``blockscaled_probes(block_fmt)``: Blackwell block-scaled MMA probes (MXFP8 / MXFP6
  / MXFP4 / NVFP4), each with its block scales and the value the reference's
  description of ST-FDPA / GST-FDPA predicts (``meta["expect"]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.cast import cast
from ..core.codec import code_dtype, codes_to_values, values, values_to_codes
from ..core.formats import Format, get_format

__all__ = ["NAN_PAYLOADS_F32", "f32_codes", "f32_values", "f32_step", "structured_cast_inputs",
           "all_codes", "tf32_operand_values", "Probe", "split_product", "gemm_probes",
           "promotion_probes", "random_operands", "operand_codes", "operand_values",
           "storage_format", "exponent_range", "diagnose_probes", "DEFAULT_BLOCKS",
           "BLOCKSCALED_PRESETS", "blockscaled_probes"]

# float32 NaNs with several payloads: quiet, signalling, all ones, both signs.
NAN_PAYLOADS_F32 = (0x7FC00000, 0x7FC00001, 0x7FC01000, 0x7FE00000, 0x7FFFFFFF, 0x7F800001,
                    0x7FA00000, 0x7F802000, 0x7FBFFFFF, 0xFFC00000, 0xFFC00001, 0xFFFFFFFF,
                    0xFF800001, 0xFFA00000)

# Block size L per input format when no tensor-core model is given (H100/H200 values of
# the published model; the capture reads them from the preset of the GPU it runs on).
DEFAULT_BLOCKS = {"fp16": 16, "bf16": 16, "tf32": 8, "fp8_e4m3": 32, "fp8_e5m2": 32}


def f32_codes(x) -> np.ndarray:
    """float32 bit patterns (uint32) of values that float32 holds exactly."""
    a = np.array(x, np.float32)  # a contiguous copy, shape kept (0-d too)
    return a.view(np.uint32)


def f32_values(codes) -> np.ndarray:
    """float32 values (as float64) of uint32 bit patterns."""
    with np.errstate(invalid="ignore"):
        return np.array(codes, np.uint32).view(np.float32).astype(np.float64)


def f32_step(codes, up: bool) -> np.ndarray:
    """The float32 neighbour (one ulp up or down in value) of finite bit patterns."""
    x = np.array(codes, np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        return f32_codes(np.nextafter(x, np.float32(np.inf if up else -np.inf)))


def structured_cast_inputs(target) -> np.ndarray:
    """Sorted unique float32 bit patterns that test every rounding decision of a cast
    float32 -> ``target`` (a format with fewer bits than float32).

    For every non-negative finite value v of the target (and the first value
    past its max, whether or not float32 can write it): v, v +- 1 float32 ulp,
    the midpoint m of v and the next value up, m +- 1 ulp; then the negatives,
    +-0, +-Inf, float32 extremes and NaNs with several payloads.

    >>> codes = structured_cast_inputs("fp8_e4m3")
    >>> bool(np.isin(f32_codes([464.0, 480.0, -464.0]), codes).all())
    True
    """
    fmt = get_format(target)
    if fmt.bits > 16 or fmt.kind != "float":
        raise ValueError(f"structured cast sets are built for float formats of at most 16 bits, "
                         f"not {fmt.name}")
    v = values(fmt)
    v = v[v >= 0]
    top = float(fmt.max_exact + (fmt.max_exact - _prev_max(fmt)))  # first value past max
    pts = np.append(v, top)
    mids = (pts[:-1] + pts[1:]) / 2
    cand = np.concatenate([pts, mids])
    with np.errstate(over="ignore"):
        c32 = cand.astype(np.float32)
    ok = np.isfinite(c32) & (c32.astype(np.float64) == cand)
    base = f32_codes(c32[ok])
    fin = base[np.isfinite(f32_values(base))]
    parts = [base, f32_step(fin, True), f32_step(fin[fin != 0], False)]
    specials = f32_codes([0.0, np.inf, np.finfo(np.float32).max, np.finfo(np.float32).tiny,
                          np.finfo(np.float32).smallest_subnormal, 1e6, 1e30])
    pos = np.concatenate(parts + [specials])
    allc = np.concatenate([pos, pos | np.uint32(0x80000000), np.asarray(NAN_PAYLOADS_F32, np.uint32)])
    return np.unique(allc.astype(np.uint32))


def _prev_max(fmt: Format):
    """Exact value one step below the format's max."""
    from fractions import Fraction
    mx = fmt.max_exact
    ulp = Fraction(2) ** (fmt.emax - fmt.mbits)
    return mx - ulp


def all_codes(fmt) -> np.ndarray:
    """Every code of a format of at most 16 bits, in its code dtype."""
    fmt = get_format(fmt)
    if fmt.bits > 16:
        raise ValueError(f"all_codes lists formats of at most 16 bits; {fmt.name} has {fmt.bits}")
    return np.arange(1 << fmt.bits, dtype=np.int64).astype(code_dtype(fmt))


# --------------------------------------------------------------------------------------------
def tf32_operand_values() -> np.ndarray:
    """float32 operands for the TF32 operand test (64 values).

    The named ones, after the reference file: ``1 + 2**-11`` (a tie on an even
    TF32 value: RNE keeps 1, RNA gives 1 + 2**-10), ``1 + 2**-11 + 2**-20`` (just
    past the tie: both nearest modes go up, truncation does not) and
    ``1 + 3*2**-11`` (a tie on an odd value: both nearest modes go up), their
    negatives, values of every low-bit pattern, and random float32 values.

    >>> x = tf32_operand_values()
    >>> x.dtype, x.size, float(x[0]) == 1 + 2**-11
    (dtype('float32'), 64, True)
    """
    named = [1 + 2 ** -11, 1 + 2 ** -11 + 2 ** -20, 1 + 3 * 2 ** -11, 1 + 2 ** -10 + 2 ** -23,
             1 + 2 ** -23, 1 + 2 ** -11 - 2 ** -23, 1.5 + 2 ** -11, 3 + 2 ** -10]
    named += [-v for v in named]
    # Every pattern of the 13 bits that TF32 drops, on a mantissa with low kept bit 0 and 1.
    low = [0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x0800, 0x17FF]
    extra = [f32_values(np.uint32(0x3F800000 | (kept << 13) | lo)).item()
             for kept in (0x000, 0x001) for lo in low]
    raw = np.random.PCG64(20260601).random_raw(64 - len(named) - len(extra))
    rnd = (np.uint32(0x3F000000) + (raw & 0x01FFFFFF).astype(np.uint32))  # [0.5, 2) and a bit more
    rnd = np.where(raw >> 63 == 1, rnd | np.uint32(0x80000000), rnd).astype(np.uint32)
    out = np.concatenate([np.asarray(named + extra, np.float64), f32_values(rnd)])
    return out.astype(np.float32)


# --------------------------------------------------------------------------------------------
def storage_format(fmt) -> Format:
    """The format an operand of ``fmt`` is stored in on the GPU (tf32 lives in fp32 words)."""
    fmt = get_format(fmt)
    return get_format("fp32") if fmt.name == "tf32" else fmt


def operand_codes(x, fmt) -> np.ndarray:
    """Codes of exact operand values in the storage format of ``fmt``."""
    return values_to_codes(np.asarray(x, np.float64), storage_format(fmt))


def operand_values(codes, fmt) -> np.ndarray:
    """Values of operand codes stored in the storage format of ``fmt``."""
    return codes_to_values(np.asarray(codes, np.int64), storage_format(fmt))


def _representable(v: float, fmt: Format) -> bool:
    if v != v:
        return fmt.has_nan
    if v in (np.inf, -np.inf):
        return fmt.inf
    return cast(v, fmt, overflow="saturate") == v and (v == 0 or abs(v) <= fmt.max)


def split_product(p: float, fmt) -> tuple[float, float] | None:
    """Two values of ``fmt`` whose product is exactly ``p`` (a power of two times a
    short significand), exponents as balanced as the format allows; None if none.

    >>> split_product(2.0 ** -18, "fp8_e4m3")
    (0.001953125, 0.001953125)
    >>> split_product(1.5 * 2 ** 14, "bf16")
    (192.0, 128.0)
    """
    fmt = get_format(fmt)
    if p == 0 or p != p or abs(p) == np.inf:
        return (p, 1.0) if _representable(p, fmt) else None
    m, e = np.frexp(abs(p))  # p = m * 2**e, m in [0.5, 1)
    m, e = float(m) * 2, int(e) - 1
    sign = -1.0 if p < 0 else 1.0
    order = sorted(range(e - 160, e + 161), key=lambda ea: (abs(2 * ea - e), -ea))
    for ea in order:
        a, b = sign * m * 2.0 ** ea, 2.0 ** (e - ea)
        if _representable(a, fmt) and _representable(b, fmt) and a * b == p:
            return a, b
    return None


@dataclass
class Probe:
    """One dot product that isolates a parameter of the tensor-core model.

    ``kind``: precision, rounding, final, block, special or promotion;
    ``param``: the probe's variable (d, the output precision, the position ...);
    ``a``, ``b``: the two length-K vectors (float64 values of the input format).
    """

    name: str
    kind: str
    param: float
    a: np.ndarray
    b: np.ndarray
    note: str = ""
    meta: dict = field(default_factory=dict)


def _vectors(k: int, terms, fill_a=0.0, fill_b=0.0):
    a = np.full(k, fill_a, np.float64)
    b = np.full(k, fill_b, np.float64)
    for pos, (x, y) in terms:
        a[pos], b[pos] = x, y
    return a, b


def _pair_terms(fmt, products, start=0):
    """Positions and factor pairs for a list of exact products, or None."""
    out = []
    for i, p in enumerate(products):
        s = split_product(p, fmt)
        if s is None:
            return None
        out.append((start + i, s))
    return out


def gemm_probes(fmt, k: int, block: int | None = None) -> list[Probe]:
    """The probes of the reference file for input format ``fmt`` at length ``k``.

    - precision d (8..28): products ``2**14, -2**14, 2**(14-d)``; the small term
      survives only while d <= F (fraction bits kept after alignment).
    - rounding d: the same with ``+-1.5 * 2**(14-d)``: truncation keeps
      ``2**(14-d)`` at d = F, rounding to nearest would give ``2**(15-d)``.
    - final P (23, 13): products ``s, 0.75 * s * 2**-P`` (s = 2 where the format
      holds the factors, else a larger power of two) and the negation: RZ to P
      fraction bits gives s, RN gives ``s * (1 + 2**-P)``.
    - block: products ``2**14, -2**14`` at positions p0, p0+1, every other term
      ``2**-18``: the result counts the small terms not fused with the big pair.
    - special: NaN, Inf, Inf - Inf, all -0, subnormal inputs and outputs, products
      beyond the fp32 range, fp16 output overflow.

    Probes whose values ``fmt`` cannot hold are left out.

    >>> names = [p.name for p in gemm_probes("fp16", 16)]
    >>> "precision_d25" in names and "block_p0" in names and "all_neg_zero" in names
    True
    """
    fmt = get_format(fmt)
    block = block or DEFAULT_BLOCKS.get(fmt.name, 16)
    probes = _ProbeList(fmt, k)
    _precision_probes(probes)
    _final_probes(probes)
    probes.extend(_block_probes(fmt, k, block))
    _special_probes(probes)
    return list(probes)


class _ProbeList(list):
    """Probes of one format and length; ``add`` leaves out those ``fmt`` cannot hold."""

    def __init__(self, fmt: Format, k: int):
        super().__init__()
        self.fmt, self.k = fmt, k

    def add(self, name: str, kind: str, param: int, products: list[float], start: int = 0, note: str = "",
            fill: tuple[float, float] | None = None, **meta: object) -> None:
        terms = _pair_terms(self.fmt, products, start)
        if terms is None or max(t[0] for t in terms) >= self.k:
            return
        fa, fb = fill if fill is not None else (0.0, 0.0)
        a, b = _vectors(self.k, terms, fa, fb)
        self.append(Probe(name, kind, param, a, b, note, dict(meta)))


_BIG = 2.0 ** 14  # the large product pair of the precision, rounding and block probes


def _precision_probes(probes: _ProbeList) -> None:
    """precision d and rounding d (both signs), d = 8..28."""
    big = _BIG
    for d in range(8, 29):
        probes.add(f"precision_d{d}", "precision", d, [big, -big, 2.0 ** (14 - d)],
                   note=f"small term 2^{14 - d} survives iff d <= F")
    for d in range(8, 29):
        probes.add(f"rounding_d{d}", "rounding", d, [big, -big, 1.5 * 2.0 ** (14 - d)],
                   note="truncation keeps 2^(14-d) at d = F")
        probes.add(f"rounding_neg_d{d}", "rounding", -d, [big, -big, -1.5 * 2.0 ** (14 - d)],
                   note="negative small term: truncation goes toward zero")


def _final_probes(probes: _ProbeList) -> None:
    """final P (23, 13) and its negation, at the smallest scale whose factors exist."""
    for p_out in (23, 13):
        for scale in range(1, 12):  # smallest scale s = 2**scale at which the factors exist
            s = 2.0 ** scale
            prods = [s, 0.75 * s * 2.0 ** -p_out]
            if _pair_terms(probes.fmt, prods) is not None:
                probes.add(f"final_p{p_out}", "final", p_out, prods, note="RZ keeps 2^s, RN adds one ulp",
                           scale=s)
                probes.add(f"final_neg_p{p_out}", "final", -p_out, [-v for v in prods],
                           note="negated: RZ gives -2^s", scale=s)
                break


def _block_probes(fmt: Format, k: int, block: int) -> list[Probe]:
    """block p0 for p0 = 0 and the block start nearest k/2: the big pair at p0, p0 + 1,
    every other product 2**-18."""
    out = []
    tiny = 2.0 ** -18
    for p0 in sorted({0, (k // 2) - ((k // 2) % block)}):
        if p0 + 1 >= k:
            continue
        terms = _pair_terms(fmt, [_BIG, -_BIG], p0)
        small = split_product(tiny, fmt)
        if terms is None or small is None:
            continue
        a = np.full(k, small[0])
        b = np.full(k, small[1])
        for pos, (x, y) in terms:
            a[pos], b[pos] = x, y
        out.append(Probe(f"block_p{p0}", "block", p0, a, b,
                         "result / 2^-18 counts the small terms not fused with the big pair",
                         {"small": tiny, "block": block}))
    return out


def _special_probes(probes: _ProbeList) -> None:
    """NaN, Inf, Inf - Inf, all -0, subnormal inputs and outputs, products beyond the
    fp32 range, fp16 output overflow."""
    fmt, k = probes.fmt, probes.k
    probes.add("nan", "special", 0, [np.nan, 1.0])
    if fmt.inf:
        probes.add("inf", "special", 0, [np.inf, 1.0])
        probes.add("inf_minus_inf", "special", 0, [np.inf, -np.inf])
    one = np.ones(k)
    probes.append(Probe("all_neg_zero", "special", 0, np.full(k, -0.0), one.copy(),
                        "every product is -0: the model gives +0"))
    sub = fmt.smallest_subnormal
    probes.add("subnormal_inputs", "special", 0, [sub, 3 * sub] if fmt.subnormals else [sub, sub])
    if fmt.name in ("bf16", "tf32"):
        probes.add("subnormal_output", "special", 0, [2.0 ** -140, 2.0 ** -141])
        probes.add("beyond_fp32_cancelled", "special", 0, [2.0 ** 200, -(2.0 ** 200), 1.0],
                   note="products past the fp32 range, exactly cancelled")
        probes.add("beyond_fp32", "special", 0, [2.0 ** 200, 2.0 ** 200])
    probes.add("out_overflow_fp16", "special", 0, [2.0 ** 16, 2.0 ** 16], note="2^17 overflows fp16 output")


def promotion_probes(fmt, k: int, positions) -> list[Probe]:
    """FP8 probes for the fp32 promotion interval (``use_fast_accum=False``).

    Every product is 1 except one product ``2**14`` at ``position``.  Once the
    big term is in the 13-bit accumulator, later products of 1 are truncated
    away; a promotion into fp32 starts a fresh partial sum that keeps them.  So
    ``2**14 + (k - 1) - result`` counts the products lost, and with the big term
    at 0 that is about one promotion interval.
    """
    fmt = get_format(fmt)
    big = split_product(2.0 ** 14, fmt)
    out = []
    for pos in positions:
        if pos >= k or big is None:
            continue
        a = np.ones(k)
        b = np.ones(k)
        a[pos], b[pos] = big
        out.append(Probe(f"promotion_k{k}_at{pos}", "promotion", pos, a, b,
                         "lost = 2^14 + (k-1) - result"))
    return out


# --------------------------------------------------------------------------------------------
def exponent_range(fmt, spread: int = 20) -> tuple[int, int]:
    """Unbiased exponents of random operands: normal binades of ``fmt`` within +-spread."""
    fmt = get_format(fmt)
    return max(-spread, fmt.emin), min(spread, fmt.emax)


def random_operands(seed: int, fmt, m: int, k: int, n: int, spread: int = 20):
    """Random operand codes ``A`` (m x k) and ``B`` (k x n) of input format ``fmt``.

    Each element: random sign, exponent uniform over ``exponent_range``, random
    mantissa bits (all 23 for tf32, whose operands are fp32 words); OCP E4M3's
    NaN pattern is replaced by 448.  Drawn from ``PCG64(seed).random_raw``, whose
    output is fixed by the algorithm, so a fixture can store the seed instead of
    the operands.

    >>> a, b = random_operands(1, "bf16", 2, 3, 4)
    >>> a.shape, b.shape, a.dtype
    ((2, 3), (3, 4), dtype('uint16'))
    """
    fmt = get_format(fmt)
    store = storage_format(fmt)
    raw = np.random.PCG64(seed).random_raw(m * k + k * n)
    lo, hi = exponent_range(fmt, spread)
    span = np.uint64(hi - lo + 1)
    exp = ((raw >> np.uint64(32)) & np.uint64(0xFFFF)) % span
    mb = store.mbits
    man = raw & np.uint64((1 << mb) - 1)
    sign = raw >> np.uint64(63)
    code = (sign << np.uint64(store.bits - 1)) | ((exp + np.uint64(lo + store.bias)) << np.uint64(mb)) | man
    if store.nan == "all_ones":
        nan = (code & np.uint64((1 << (store.bits - 1)) - 1)) == np.uint64((1 << (store.bits - 1)) - 1)
        code = np.where(nan, code - np.uint64(1), code)
    code = code.astype(code_dtype(store))
    return code[: m * k].reshape(m, k), code[m * k:].reshape(k, n)


# --------------------------------------------------------------------------------------------
def diagnose_probes(names, kinds, params, results, k: int, metas=None) -> dict:
    """What a set of probe results says about the model parameters.

    ``results``: float64 dot-product results in probe order (from the GPU or
    from the emulator, so both can be shown side by side).  Returns a dict:
    ``F`` (largest d whose small term survived), ``rounding`` (``truncate`` or
    ``nearest`` from the rounding probes at that d), ``final_p23`` /
    ``final_p13`` (``RZ`` or ``RN``), ``lost_block_p0`` (small terms lost with
    the big pair at 0: about L - 2 when L <= k), ``promotion_lost`` (position ->
    products lost).
    """
    out: dict = {}
    r = {n: float(v) for n, v in zip(names, results)}
    prec = sorted(int(p) for n, kd, p in zip(names, kinds, params) if kd == "precision" and r[n] != 0)
    if any(kd == "precision" for kd in kinds):
        out["F"] = max(prec) if prec else None
        out["precision_survivors"] = prec
    f = out.get("F")
    if f is not None and f"rounding_d{f}" in r:
        v = r[f"rounding_d{f}"]
        out["rounding"] = ("truncate" if v == 2.0 ** (14 - f) else
                           "nearest" if v == 2.0 ** (15 - f) else f"other ({v!r})")
    for n, kd, p in zip(names, kinds, params):
        if kd == "final" and p > 0:
            s = (metas or {}).get(n, {}).get("scale", 2.0)
            v = r[n]
            exact = s * (1 + 0.75 * 2.0 ** -p)
            out[f"final_p{int(p)}"] = ("RZ" if v == s else "RN" if v == s * (1 + 2.0 ** -p)
                                      else "exact (more than P bits kept)" if v == exact
                                      else f"other ({v!r})")
        if kd == "block" and n == "block_p0":
            out["lost_block_p0"] = int(round((k - 2) - r[n] / 2.0 ** -18)) if np.isfinite(r[n]) else None
        if kd == "promotion":
            out.setdefault("promotion_lost", {})[int(p)] = (
                int(round(2.0 ** 14 + (k - 1) - r[n])) if np.isfinite(r[n]) else None)
    return out


# Block format -> (the B200 preset whose instruction torch / cuBLAS picks for it, F, L,
# scale block, elements summed exactly before scaling), from the reference (sections 3-4).
BLOCKSCALED_PRESETS = {
    "mxfp8_e4m3": ("b200/mxfp8_e4m3", 25, 32, 32, 1),
    "mxfp8_e5m2": ("b200/mxfp8_e5m2", 25, 32, 32, 1),
    "mxfp6_e2m3": ("b200/mxfp6_e2m3", 25, 32, 32, 1),
    "mxfp6_e3m2": ("b200/mxfp6_e3m2", 25, 32, 32, 1),
    "mxfp4_e2m1": ("b200_mxf4nvf4/mxfp4_e2m1", 35, 64, 32, 16),
    "nvfp4": ("b200/nvfp4", 35, 64, 16, 16),
}


def _bs_probe(probes, name, kind, param, k, blk, terms, sa, sb, expect, note, model):
    """A block-scaled probe: ``terms`` = [(position, a value, b value)], scales per block."""
    a, b = np.zeros(k), np.zeros(k)
    for pos, x, y in terms:
        a[pos], b[pos] = x, y
    nb = k // blk
    sa_full, sb_full = np.ones(nb), np.ones(nb)
    for i, v in sa.items():
        sa_full[i] = v
    for i, v in sb.items():
        sb_full[i] = v
    probes.append(Probe(name, kind, param, a, b, note,
                        {"a_scale": sa_full, "b_scale": sb_full, "expect": float(expect),
                         "model": model, "block": blk}))


def blockscaled_probes(block_fmt: str) -> list[Probe]:
    """Probes of the Blackwell block-scaled MMA for ``block_fmt`` (``"mxfp8_e4m3"``,
    ``"mxfp8_e5m2"``, ``"mxfp6_e2m3"``, ``"mxfp6_e3m2"``, ``"mxfp4_e2m1"``, ``"nvfp4"``).

    Each is one dot product: ``a``, ``b`` (element values, K long), ``meta["a_scale"]``,
    ``meta["b_scale"]`` (one scale per ``meta["block"]`` elements) and ``meta["expect"]``,
    the result the reference's description gives (ST-FDPA: k = 32, F = 25; GST-FDPA:
    k = 64, groups of 16 exact, alignment exponent from the scales, F = 35; c aligned
    as a term; RZ to fp32); ``meta["model"]`` names the preset.

    - ``cprec_d``: K = 2 steps.  ST: step 1 leaves c = 1, step 2 adds -2**-d (an element
      -1 scaled by 2**-d): c is aligned with it, so 1 - 2**-d survives while d <= F and
      RZ gives ``1 - 2**-min(d, 24)``; past F the result is 1.  (Were c added after the
      products by an RNE addition, d = 25 would give 1.)  GST: c = 36 * 2**16 (exponent
      21) from step 1, step 2 adds -2**-d: kept while 21 + d <= F (d <= 14), RZ gives
      c - 0.25, else c.
    - ``precision_d`` (MXFP8 only: the elements must span the range): products 2**14,
      -2**14, 2**(14-d) in one step: 2**(14-d) iff d <= 25.
    - ``scale_nan``: a NaN scale gives NaN.
    - GST ``group_exact``: one group 6*6 - 6*6 + 0.5*0.5 = 0.25 exactly, plus 1 * 1 with
      scales 2**-9 * 2**-9 in another block: 0.25 + 2**-18.  ``scale_exponent``: two
      groups +-0.25 * 2**16 (scales 2**8, alignment exponent 16) cancel; a third,
      0.25 * 2**-18 (half a unit of 2**(16-35)), is cut: +0 (aligned by the values it
      would be 2**-20).  ``ue4m3_sign`` (NVFP4): a scale -1.5 counts as 1.5.

    >>> [p.name for p in blockscaled_probes("nvfp4")][:2]
    ['cprec_d10', 'cprec_d11']
    """
    key = block_fmt.strip().lower()
    if key not in BLOCKSCALED_PRESETS:
        raise ValueError(f"no block-scaled probes for {block_fmt!r}. Valid: "
                         f"{', '.join(BLOCKSCALED_PRESETS)}.")
    model, F, L, blk, group = BLOCKSCALED_PRESETS[key]
    out: list[Probe] = []
    k2 = 2 * L
    if group == 1:  # ST-FDPA
        for d in range(20, 29):
            want = 1.0 - 2.0 ** -min(d, 24) if d <= F else 1.0
            _bs_probe(out, f"cprec_d{d}", "cprec", d, k2, blk, [(0, 1.0, 1.0), (L, -1.0, 1.0)],
                      {L // blk: 2.0 ** -d}, {}, want, "c = 1 from step 1, aligned with -2^-d",
                      model)
        if key.startswith("mxfp8"):
            elem = "fp8_e4m3" if key == "mxfp8_e4m3" else "fp8_e5m2"
            for d in range(20, 29):
                prods = [2.0 ** 14, -(2.0 ** 14), 2.0 ** (14 - d)]
                pairs = [split_product(p, elem) for p in prods]
                if any(pr is None for pr in pairs):
                    continue
                terms = [(i, pr[0], pr[1]) for i, pr in enumerate(pairs) if pr is not None]
                _bs_probe(out, f"precision_d{d}", "precision", d, L, blk, terms, {}, {},
                          2.0 ** (14 - d) if d <= F else 0.0, "2^(14-d) survives iff d <= F",
                          model)
    else:  # GST-FDPA
        c0 = 36.0 * 2.0 ** 16
        for d in range(10, 19):
            sa_, sb_ = 2.0 ** -(d - d // 2), 2.0 ** -(d // 2)
            _bs_probe(out, f"cprec_d{d}", "cprec", d, k2, blk, [(0, 6.0, 6.0), (L, -1.0, 1.0)],
                      {0: 2.0 ** 8, L // blk: sa_}, {0: 2.0 ** 8, L // blk: sb_},
                      c0 - 0.25 if -d >= 21 - F else c0,  # c0 = 1.125 * 2**21
                      "c = 36 * 2^16 from step 1, then -2^-d", model)
        _bs_probe(out, "group_exact", "group", 0, L, blk,
                  [(0, 6.0, 6.0), (1, -6.0, 6.0), (2, 0.5, 0.5), (32, 1.0, 1.0)],
                  {32 // blk: 2.0 ** -9}, {32 // blk: 2.0 ** -9}, 0.25 + 2.0 ** -18,
                  "a group of 16 products is summed exactly", model)
        _bs_probe(out, "scale_exponent", "group", 1, L, blk,
                  [(0, 0.5, 0.5), (16, -0.5, 0.5), (32, 0.5, 0.5)],
                  {0: 2.0 ** 8, 16 // blk: 2.0 ** 8, 32 // blk: 2.0 ** -9},
                  {0: 2.0 ** 8, 16 // blk: 2.0 ** 8, 32 // blk: 2.0 ** -9}, 0.0,
                  "groups are aligned by their scales' exponents", model)
        if key == "nvfp4":
            _bs_probe(out, "ue4m3_sign", "special", 0, L, blk, [(0, 1.0, 1.0)], {0: -1.5}, {},
                      1.5, "the sign bit of a ue4m3 scale is ignored", model)
    _bs_probe(out, "scale_nan", "special", 1, L, blk, [(0, 1.0, 1.0)], {0: np.nan}, {},
              np.nan, "a NaN scale gives NaN", model)
    return out
