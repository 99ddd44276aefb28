"""Golden bits: every public function of ``floatfmt`` over compact grids, hashed.

A refactoring guard (issue 26): moving modules, splitting files or merging twins must not
change one bit of any result.  Each entry of ``tests/data/golden.json`` is the SHA-256 of
the results of one public function on one format (or one group of calls), computed on the
commit that wrote the file.  The grids are small versions of the oracle tests' ones: the
format's own values, the midpoints between neighbours and their float64 neighbours, values
past the range, specials, and seeded random values of every binade.  Every format, every
rounding mode, every overflow policy, ftz / daz, NumPy arrays, CPU tensors through the
NumPy kernels and CPU tensors forced through the namespace code that CUDA runs
(``force_namespace``).

This is not an oracle: the oracle tests prove the results right; this proves them
unchanged.  A deliberate change of results (a bug fix) regenerates the file:
``PYTHONPATH=$PWD python tests/test_golden.py --update`` (say why in the commit).
"""

from __future__ import annotations

import hashlib
import json
import math
import pathlib
import sys
import warnings

import numpy as np
import pytest

import floatfmt as ff

GOLDEN = pathlib.Path(__file__).resolve().parent / "data" / "golden.json"
DET = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")


# ------------------------------------------------------------------------- hashing
def _canon(obj, out: list) -> None:
    """A byte string for any result: arrays as float64 / int64 bytes with their shape and
    dtype, NaN made one pattern (payloads are not part of the contract), objects by
    their fields."""
    if obj is None or isinstance(obj, (bool, str)):
        out.append(repr(obj).encode())
    elif isinstance(obj, (int, np.integer)):
        out.append(b"i" + str(int(obj)).encode())
    elif isinstance(obj, (float, np.floating)):
        v = float(obj)
        out.append(b"f" + (b"nan" if math.isnan(v) else np.float64(v).tobytes()))
    elif hasattr(obj, "detach") and hasattr(obj, "cpu"):  # a torch tensor
        out.append(b"T" + str(obj.dtype).encode() + str(obj.device).encode())
        t = obj.detach().cpu()
        _canon(t.double().numpy() if t.is_floating_point() else t.to(dtype=__import__("torch").int64).numpy(), out)
    elif isinstance(obj, np.ndarray):
        out.append(b"A" + str(obj.dtype).encode() + str(obj.shape).encode())
        if obj.dtype.kind in "iub":
            out.append(np.ascontiguousarray(obj.astype(np.int64)).tobytes())
        elif obj.dtype.kind in "OUS":
            for v in obj.ravel().tolist():
                _canon(v, out)
        else:  # numpy and ml_dtypes floats
            a = np.asarray(obj.astype(np.float64))
            a = np.where(np.isnan(a), np.nan, a)
            out.append(np.ascontiguousarray(a).tobytes())
    elif isinstance(obj, dict):
        out.append(b"D")
        for k in sorted(obj, key=str):
            _canon(str(k), out)
            _canon(obj[k], out)
    elif isinstance(obj, (list, tuple)):
        out.append(b"L" + str(len(obj)).encode())
        for v in obj:
            _canon(v, out)
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        out.append(b"B" + bytes(obj))
    elif hasattr(obj, "__dataclass_fields__"):
        out.append(type(obj).__name__.encode())
        _canon({k: getattr(obj, k) for k in obj.__dataclass_fields__ if not k.startswith("_")}, out)
    elif isinstance(obj, BaseException):
        out.append(b"E" + type(obj).__name__.encode())
    else:
        try:
            arr = np.asarray(obj)
        except Exception:  # noqa: BLE001 - any other object: its text
            arr = None
        if arr is not None and arr.dtype.kind in "fiub":
            _canon(arr, out)
        else:
            out.append(type(obj).__name__.encode() + str(obj).encode())


def _call(fn, *args, **kwargs):
    """The result, or the exception's type (an error is a result too).  Where the first
    argument is an array holding NaN or Inf and the call raises (formats without NaN
    reject it), the call is repeated on the finite values, so the results still count."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        x = args[0] if args else None
        if isinstance(x, np.ndarray) and x.dtype.kind == "f" and not np.all(np.isfinite(x)):
            return [e, _call(fn, np.where(np.isfinite(x), x, 0.0), *args[1:], **kwargs)]
        if hasattr(x, "isfinite") and hasattr(x, "detach") and not bool(x.isfinite().all()):
            return [e, _call(fn, x.nan_to_num(0.0, 0.0, 0.0), *args[1:], **kwargs)]
        return e


def _sr(mode: str, seed: int = 7) -> dict:
    """The options a stochastic mode needs (a seeded generator; P3109's modes: sr_bits)."""
    if not mode.startswith("stochastic"):
        return {}
    return {"rng": np.random.default_rng(seed), **({"sr_bits": 6} if mode != "stochastic" else {})}


class Digest:
    """Named groups of results; each group's hash is one golden entry."""

    def __init__(self) -> None:
        self.groups: dict[str, hashlib._Hash] = {}
        self.names: set[str] = set()

    def add(self, group: str, result) -> None:
        out: list[bytes] = []
        _canon(result, out)
        h = self.groups.setdefault(group, hashlib.sha256())
        for b in out:
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)

    def hexdigests(self) -> dict[str, str]:
        return {k: v.hexdigest() for k, v in sorted(self.groups.items())}


# ------------------------------------------------------------------------- grids
def grid(name: str, n_random: int = 256, stride: int = 1) -> np.ndarray:
    """The format's values (every ``stride``-th one), midpoints and their neighbours,
    values past the range, specials, random doubles of every binade near the range."""
    f = ff.get_format(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 5e-324, -5e-324, 1.0, -1.0]
    if f.bits <= 16:
        v = ff.values(name)
        v = v[np.isfinite(v)]
        v = np.unique(v)[::stride]
        mid = (v[1:] + v[:-1]) / 2
        pts = np.concatenate([v, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf),
                              v * 1.25, [v[-1] * 2, v[0] * 2, v[-1] + 1, v[0] - 1]])
    else:
        pts = np.array([], dtype=np.float64)
    if f.kind == "float":
        lo, hi = max(f.emin - f.mbits - 4, -1074), min(f.emax + 4, 1023)
    else:
        lo, hi = -4, f.bits + 2
    r = np.ldexp(rng.uniform(1.0, 2.0, n_random), rng.integers(lo, hi + 1, n_random))
    r *= np.where(rng.random(n_random) < 0.5, -1.0, 1.0)
    return np.concatenate([pts, r, special]).astype(np.float64)


FORMATS = ff.formats()
SUB_BYTE = [n for n in FORMATS if ff.get_format(n).bits < 8]


def _stride(name: str) -> int:
    return 64 if ff.get_format(name).bits > 8 else 1


# ------------------------------------------------------------------------- the digest
def numpy_digest(d: Digest) -> None:  # noqa: C901 - one list of calls
    # formats, info, names
    d.add("api/names", sorted(ff.__all__))
    d.add("api/modes", [ff.MODES, ff.OVERFLOWS, ff.formats(), ff.block_formats(), ff.p3109_formats()])
    for name in FORMATS + ff.block_formats():
        d.add("info", [name, ff.info(name)])
    for k, p in ((8, 3), (8, 4), (6, 2), (3, 1)):
        f = ff.p3109(k, p)
        d.add("p3109", [f.name, f.ebits, f.mbits, f.bias, ff.values(f)])
    for name in ff.block_formats():
        d.add("block_formats", ff.get_block_format(name))
    d.add("tensorcore_models", sorted(ff.tensorcore_models()))
    for _name, m in sorted(ff.tensorcore_models().items()):
        d.add("tensorcore_models", m)
    # a format and a block format built by hand, not registered (the registry is global)
    e3m3 = ff.Format("golden_e3m3", ebits=3, mbits=3, inf=False, nan="ieee")
    d.add("Format", [e3m3.bits, ff.values(e3m3), _call(ff.cast, grid("fp8_e4m3"), e3m3),
                     isinstance(ff.info(e3m3), ff.FormatInfo), ff.info(e3m3)])
    d.add("Format", _call(ff.register, ff.get_format("bf16"), "bf16"))  # re-registering: its answer
    bf = ff.BlockFormat("golden_mx6", element="fp6_e3m2", block_size=16, scale="e8m0")
    d.add("BlockFormat", [bf, isinstance(ff.info(bf), ff.BlockFormatInfo), ff.info(bf)])
    n0 = ff.get_num_threads()
    with ff.limit_threads(1) as n1:
        d.add("threads", [n1, ff.get_num_threads(), ff.cast(grid("bf16"), "bf16")])
    ff.set_num_threads(n0)
    d.add("threads", ff.cast(grid("bf16"), "bf16"))
    ff.set_matmul_kernel("numpy")  # the default, said out loud
    with ff.matmul_kernel("numpy"):
        assert ff.get_matmul_kernel() == "numpy"
        d.add("matmul_kernel", _matmul_kernel_cases())

    for name in FORMATS:
        f = ff.get_format(name)
        x = grid(name, stride=_stride(name))
        d.add(f"values/{name}", _call(ff.values, name) if f.bits <= 16 else None)
        # cast / encode under every mode and overflow policy; ftz / daz on two modes
        for mode in ff.MODES:
            d.add(f"cast/{name}", [mode, _call(ff.cast, x, name, mode, **_sr(mode))])
            d.add(f"encode/{name}", [mode, _call(ff.encode, x, name, mode, **_sr(mode))])
            if mode == "stochastic":
                d.add(f"cast_sr_bits/{name}", [mode, _call(ff.cast, x, name, mode, rng=np.random.default_rng(3), sr_bits=8)])
        for ov in ff.OVERFLOWS:
            for mode in ("nearest_even", "toward_zero", "up"):
                d.add(f"cast_overflow/{name}", [ov, mode, _call(ff.cast, x, name, mode, ov)])
            d.add(f"encode_overflow/{name}", [ov, _call(ff.encode, x, name, overflow=ov)])
        for ftz in (False, True):
            for daz in (False, True):
                for mode in ("nearest_even", "down", "odd"):
                    d.add(f"cast_ftz_daz/{name}", [ftz, daz, mode, _call(ff.cast, x, name, mode, ftz=ftz, daz=daz)])
        d.add(f"cast_scalar/{name}", [_call(ff.cast, float(v), name) for v in x[:: max(1, len(x) // 16)]])
        d.add(f"cast_f32/{name}", _call(ff.cast, x.astype(np.float32), name))
        d.add(f"classify/{name}", [_call(ff.classify, x, name), _call(ff.classify, x, name, "toward_zero")])
        for fn in (ff.next_up, ff.next_down, ff.ulp):
            d.add(f"{fn.__name__}/{name}", _call(fn, x, name))
        if f.bits <= 16:
            codes = np.arange(2 ** f.bits) if f.bits <= 8 else np.arange(0, 2 ** f.bits, 7)
            if f.kind == "int" and f.signed:
                codes = codes - 2 ** (f.bits - 1)
            d.add(f"decode/{name}", _call(ff.decode, codes, name))
            xf = x[np.isfinite(x)]
            packed = _call(ff.pack, _call(ff.encode, xf, name, overflow="saturate"), name)
            d.add(f"pack/{name}", packed)
            if isinstance(packed, np.ndarray):
                for order in ("little", "big"):
                    p = ff.pack(ff.encode(xf, name, overflow="saturate"), name, bitorder=order)
                    d.add(f"pack/{name}", [order, p, _call(ff.unpack, p, name, xf.shape, bitorder=order)])

    # elementwise arithmetic
    for name in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "fp6_e3m2", "fp8_e4m3fnuz", "tf32", "int8"):
        x = grid(name, n_random=64, stride=_stride(name) * 4)
        a = x[: len(x) // 2 * 2].reshape(2, -1)
        rng = np.random.default_rng(5)
        b = rng.permutation(a[1])
        if not ff.info(name).nan_codes:  # no NaN to carry: finite operands
            a, b = np.where(np.isfinite(a), a, 1.0), np.where(np.isfinite(b), b, 1.0)
        for mode in (*DET, "stochastic"):
            kw = _sr(mode, 11)
            for fn in (ff.add, ff.sub, ff.mul, ff.div, ff.minimum, ff.maximum):
                d.add(f"ops/{name}", [fn.__name__, mode, _call(fn, a[0], b, name, mode, **kw)])
            d.add(f"ops/{name}", ["fma", mode, _call(ff.fma, a[0], b, a[1], name, mode, **kw)])
            for fn in (ff.sqrt, ff.neg, ff.abs):
                d.add(f"ops/{name}", [fn.__name__, mode, _call(fn, a[0], name, mode, **kw)])
        for ov in ff.OVERFLOWS:
            d.add(f"ops_overflow/{name}", [ov, _call(ff.mul, a[0], b, name, overflow=ov),
                                          _call(ff.add, a[0], b, name, overflow=ov, ftz=True, daz=True)])
        arr = _call(ff.array, a[0][:32], name)
        if isinstance(arr, ff.FPArray):
            s = ff.scalar(1.5, name)
            d.add(f"fparray/{name}", [arr.values, arr.codes, (arr + s).values, (arr * arr).values,
                                      (arr - s).values, (arr / s).values, arr.sum().values,
                                      _call(lambda: arr.astype("fp32").values), arr.tolist()])

    # accumulation, dot, matmul, tensor cores
    rng = np.random.default_rng(2024)
    v = rng.standard_normal(96) * np.exp2(rng.integers(-8, 8, 96))
    A = rng.standard_normal((8, 64)) * np.exp2(rng.integers(-6, 6, (8, 64)))
    B = rng.standard_normal((64, 8)) * np.exp2(rng.integers(-6, 6, (64, 8)))
    C = rng.standard_normal((8, 8))
    for order in ("sequential", "pairwise", "blocked", "kahan", "exact", "unknown"):
        for name, acc in (("bf16", "fp32"), ("fp16", "fp16"), ("fp8_e4m3", "fp32"), ("fp32", None)):
            d.add("sum", [order, name, acc, _call(ff.sum, v, name, acc, order)])
            d.add("sum", [order, name, acc, _call(ff.sum, A, name, acc, order, axis=1, block=16)])
            d.add("dot", [order, name, acc, _call(ff.dot, v, v[::-1], name, acc, order)])
            d.add("matmul", [order, name, acc, _call(ff.matmul, A, B, name, acc, order)])
        d.add("matmul_epilogue", [order, _call(ff.matmul, A, B, "bf16", "fp32", order, out_fmt="bf16",
                                                alpha=0.5, beta=2.0, c=C)])
    for mode in ("toward_zero", "stochastic"):
        d.add("sum_modes", [mode, _call(ff.sum, v, "bf16", "bf16", rounding=mode, rng=np.random.default_rng(1))])
    for mname, m in sorted(ff.tensorcore_models().items()):
        k = m.L * 2 if m.block_fmt is None else max(m.scale_block, m.L) * 2
        a = A[:4, :k] if k <= 64 else np.tile(A[:4], (1, k // 64 + 1))[:, :k]
        b = B[:k, :4] if k <= 64 else np.tile(B[:, :4], (k // 64 + 1, 1))[:k]
        if m.block_fmt is None:
            d.add(f"mma/{mname}", _call(ff.mma, a, b, C[:4, :4], m.fmt, mname, m.acc_fmt))
            d.add(f"mma/{mname}", _call(ff.matmul, a, b, m.fmt, model=mname))
            d.add(f"mma/{mname}", _call(ff.dot, a[0], b[:, 0], m.fmt, model=mname))
        else:
            d.add(f"mma/{mname}", _call(ff.block_scaled_matmul, a, b, m.block_fmt, mname, C[:4, :4]))
    d.add("mma/custom", _call(ff.mma, A[:4, :16], B[:16, :4], C[:4, :4], "fp16",
                              ff.TensorCoreModel("custom", "fp16", F=3, L=4, rounding="nearest_even")))

    # quantisation and scaling
    X = rng.standard_normal((8, 64)) * np.exp2(rng.integers(-4, 4, (8, 1)))
    X[0, 0] = 40.0
    for fmt in ("int8", "uint8", "int4", "uint4", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "bf16", *ff.block_formats()):
        for opts in ({}, {"scheme": "asymmetric"}, {"granularity": "channel", "axis": 0},
                     {"granularity": "group", "group_size": 16}, {"granularity": "block", "block": (4, 16)},
                     {"calibration": "percentile", "percentile": 99.0}, {"calibration": "mse"},
                     {"pow2_scale": True}, {"narrow_range": False}, {"rounding": "stochastic", "rng": 9},
                     {"margin": 1}, {"overflow": "inf"}):
            opts = {k: (np.random.default_rng(v) if k == "rng" else v) for k, v in opts.items()}
            q = _call(ff.quantize, X, fmt, **opts)
            if isinstance(q, ff.QuantizedTensor):
                d.add(f"quantize/{fmt}", [sorted(opts), q.codes, q.dequantize(), ff.dequantize(q, np.float32),
                                          q.scale_codes, q.granularity, q.bits_per_element, _call(q.limits)])
            else:
                d.add(f"quantize/{fmt}", [sorted(opts), q])
        d.add(f"fake_quant/{fmt}", _call(ff.fake_quant, X, fmt))
    qa = ff.quantize(X, "int8")
    qb = ff.quantize(X.T, "int8", granularity="channel", axis=1)
    r = _call(ff.int_matmul, qa, qb)
    d.add("int_matmul", [getattr(r, k, r) for k in ("acc", "scale", "overflowed", "values")])
    r = _call(ff.int_matmul, qa, qb, out_scale=0.5, out_zero_point=3)
    d.add("int_matmul", [getattr(r, k, r) for k in ("acc", "scale", "overflowed", "values", "codes")])
    for recipe in ("deepseek_v3",):
        d.add("recipe_matmul", _call(ff.recipe_matmul, np.tile(X, (1, 4)), np.tile(X.T, (4, 1)), recipe))
    d.add("recipe_matmul", _call(ff.recipe_matmul, X, X.T, ff.BlockFP8Recipe("small", act_group=16,
                                                                          weight_block=(16, 16), promote_every=16)))
    for algo in ("max", "most_recent"):
        ds = ff.DelayedScaling(history_len=4, algo=algo, margin=1)
        for i, k in enumerate((1.0, 3.0, np.inf, 0.5, 0.0, 2.0, 1.0)):
            d.add("delayed_scaling", [algo, _call(ds.quantize, "x", X * k), _call(ds.quantize, "grad_x", X / (i + 1)),
                                      _call(ds.update)])
    ls = ff.LossScaler(init_scale=1024.0, growth_interval=2)
    for found_inf in (False, False, True, False, False, False):
        d.add("loss_scaler", [_call(ls.update, found_inf), ls.get_scale(), ls.state_dict()])
    d.add("quantdemo", _call(ff.compare_quantization, X, show=False))
    d.add("quantdemo", _call(ff.quantization_error, X, ff.quantize(X, "fp8_e4m3")))
    d.add("quantdemo", _call(ff.master_weights_demo, show=False))

    # teaching: the text users read
    for x, fmt, kw in ((0.1, "bf16", {}), (1e6, "fp8_e4m3", {"overflow": "saturate"}), ([0.3, -2.7, 1e-9], "fp16", {}),
                       (0.1, "fp8_e5m2", {"rounding": "toward_zero"}), (0.1, None, {}), (300.0, "int8", {}),
                       (list(X[0, :32]), "mxfp8_e4m3", {}), (list(X[0, :16]), "nvfp4", {})):
        e = _call(ff.explain, x, fmt, **kw)
        d.add("explain", str(e))
    d.add("compare", str(_call(ff.compare)))
    d.add("compare", str(_call(ff.compare, ["fp8_e4m3", "mxfp4_e2m1", "int4"])))

    # flags
    with ff.flags(masks=True) as fc:
        ff.cast(grid("fp8_e4m3"), "fp8_e4m3")
        ff.add(np.array([1e4, 1.0]), np.array([1e4, 2.0 ** -20]), "fp16")
    d.add("flags", [isinstance(fc, ff.FlagCounts), str(fc), {k: getattr(fc, k) for k in dir(fc) if not k.startswith("_") and not callable(getattr(fc, k))}])


def _matmul_kernel_cases() -> list:
    """Matrix-unit products for the kernel setting: the compiled kernel (torch's digest)
    must give the numpy kernel's bits, so both groups hash the same values."""
    rng = np.random.default_rng(17)
    a, b = rng.standard_normal((2, 9, 37)), rng.standard_normal((37, 11))
    c = ff.cast(rng.standard_normal((9, 11)), "fp32")
    return [ff.matmul(a, b, "bf16", model="h100"), ff.mma(a, b, c, "bf16", "h100"),
            ff.matmul(a, b, "fp8_e4m3", model="b200"), ff.matmul(a, b, "tf32", model="a100")]


def torch_digest(d: Digest, torch) -> None:
    """CPU tensors: through the NumPy kernels and forced through the namespace code; the
    compiled matrix-unit kernel."""
    from floatfmt.backend.dispatch import force_namespace

    import floatfmt.arith.matrixunit.tensorcore_fused as fused
    least, fused.MIN_PRODUCTS = fused.MIN_PRODUCTS, 0  # these small products too
    try:
        with ff.matmul_kernel("compiled"):
            assert ff.get_matmul_kernel() == "compiled"
            d.add("torch_matmul_kernel", _matmul_kernel_cases())
    finally:
        fused.MIN_PRODUCTS = least

    for path in ("host", "namespace"):
        with force_namespace(path == "namespace"):
            for name in FORMATS:
                x = grid(name, n_random=128, stride=_stride(name) * 2)
                for dt in (torch.float64, torch.float32):
                    t = torch.tensor(x, dtype=dt)
                    for mode in (*DET, "stochastic"):
                        gen = torch.Generator().manual_seed(5) if mode == "stochastic" else None
                        d.add(f"torch_{path}/cast/{name}", [str(dt), mode, _call(ff.cast, t, name, mode, rng=gen)])
                    for ov in ff.OVERFLOWS:
                        d.add(f"torch_{path}/cast_overflow/{name}", [ov, _call(ff.cast, t, name, overflow=ov),
                                                                    _call(ff.cast, t, name, "toward_zero", ov, ftz=True, daz=True)])
                    d.add(f"torch_{path}/encode/{name}", _call(ff.encode, t, name))
                    for fn in (ff.next_up, ff.next_down, ff.ulp):
                        d.add(f"torch_{path}/{fn.__name__}/{name}", _call(fn, t, name))
            rng = np.random.default_rng(8)
            A = torch.tensor(rng.standard_normal((4, 32)))
            B = torch.tensor(rng.standard_normal((32, 4)))
            for name in ("bf16", "fp16", "fp8_e4m3"):
                for fn in (ff.add, ff.mul, ff.div):
                    d.add(f"torch_{path}/ops/{name}", [fn.__name__, _call(fn, A[0], B[:, 0], name)])
                d.add(f"torch_{path}/ops/{name}", _call(ff.fma, A[0], B[:, 0], A[1], name))
                d.add(f"torch_{path}/ops/{name}", _call(ff.sqrt, A[0].abs(), name))
                for order in ("sequential", "pairwise", "kahan"):
                    d.add(f"torch_{path}/sum/{name}", [order, _call(ff.sum, A[0], name, "fp32", order)])
                    d.add(f"torch_{path}/matmul/{name}", [order, _call(ff.matmul, A, B, name, "fp32", order)])
            for model in ("a100/bf16", "h100/fp8_e4m3", "v100/fp16"):
                m = ff.tensorcore_models()[model]
                d.add(f"torch_{path}/mma/{model}", _call(ff.matmul, A, B, m.fmt, model=model))
            for fmt, opts in (("int8", {}), ("fp8_e4m3", {}), ("mxfp8_e4m3", {}), ("nvfp4", {}),
                              ("int8", {"granularity": "channel", "axis": 0}), ("int4", {"scheme": "asymmetric"})):
                q = _call(ff.quantize, A, fmt, **opts)
                d.add(f"torch_{path}/quantize/{fmt}", [q.codes, q.dequantize()] if isinstance(q, ff.QuantizedTensor) else q)
                d.add(f"torch_{path}/fake_quant/{fmt}", _call(ff.fake_quant, A, fmt, **opts))


def compute() -> dict[str, str]:
    d = Digest()
    numpy_digest(d)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            torch_digest(d, torch)
        finally:
            torch.set_num_threads(n)
    return d.hexdigests()


# ------------------------------------------------------------------------- the test
@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    return json.loads(GOLDEN.read_text())["hashes"]


@pytest.fixture(scope="module")
def now() -> dict[str, str]:
    return compute()


def test_every_public_name_is_in_the_digest():
    """A new public name must be added to the digest (and the golden file regenerated)."""
    import inspect
    src = inspect.getsource(sys.modules[__name__])
    missing = [n for n in ff.__all__ if f"ff.{n}" not in src]
    assert not missing, f"add these public names to tests/test_golden.py: {missing}"


def test_compiled_kernel_digest_equals_numpy_kernel_digest(now):
    """The compiled matrix-unit kernel's products hash as the numpy kernel's."""
    if "torch_matmul_kernel" not in now:
        pytest.importorskip("torch")
    assert now["torch_matmul_kernel"] == now["matmul_kernel"]


def test_golden_bits_unchanged(golden, now):
    if not any(k.startswith("torch_") for k in golden):
        pytest.fail("the golden file has no torch entries: regenerate it where torch is installed")
    if not any(k.startswith("torch_") for k in now):
        pytest.importorskip("torch")
    changed = sorted(k for k in golden if k in now and golden[k] != now[k])
    missing = sorted(set(golden) - set(now))
    new = sorted(set(now) - set(golden))
    assert not (changed or missing or new), (
        f"results changed in {len(changed)} groups: {changed[:40]}\nmissing groups: {missing[:20]}\n"
        f"new groups: {new[:20]}\n(a deliberate change: regenerate with "
        "`python tests/test_golden.py --update` and say why in the commit)")


def test_the_digest_sees_a_one_bit_change():
    """The hash is of the bits: one ulp anywhere changes it, and -0.0 is not 0.0."""
    base = Digest()
    base.add("g", np.array([1.0, 0.0]))
    for other in (np.array([np.nextafter(1.0, 2.0), 0.0]), np.array([1.0, -0.0]), np.array([1.0, 0.0], dtype=np.float32)):
        d = Digest()
        d.add("g", other)
        assert d.hexdigests() != base.hexdigests()


if __name__ == "__main__":
    if "--update" in sys.argv:
        import time
        t0 = time.perf_counter()
        hashes = compute()
        GOLDEN.parent.mkdir(exist_ok=True)
        meta = {"numpy": np.__version__}
        try:
            import torch
            meta["torch"] = torch.__version__
        except ImportError:
            pass
        GOLDEN.write_text(json.dumps({"written_by": "tests/test_golden.py --update", "versions": meta,
                                      "hashes": hashes}, indent=1, sort_keys=True) + "\n")
        print(f"{len(hashes)} groups written to {GOLDEN} in {time.perf_counter() - t0:.1f} s")
    else:
        print(__doc__)
