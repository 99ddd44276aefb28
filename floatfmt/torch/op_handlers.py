"""The op handlers of ``emulate``: one per GEMM-like torch function (see
``floatfmt.torch.interception`` for what each computes); ``HANDLERS`` maps the
function's name to its handler, ``attention`` is the emulated attention."""

from __future__ import annotations

import functools
import inspect
import math
from math import prod
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..core.cast import cast
from . import implicit_gemm as ig
from .emulated_functions import (ConvFunction, Emulation, GemmFunction, GemmSpec, RoundFunction, TapFunction,
                                 batch_shape)

__all__ = ["HANDLERS", "NOT_EMULATED", "attention", "linear"]


# ------------------------------------------------------------------ roles and helpers
def _param(t: Any) -> nn.Parameter | None:
    """The parameter ``t`` is (or is a view of), else None."""
    if isinstance(t, nn.Parameter):
        return t
    base = getattr(t, "_base", None)
    return base if isinstance(base, nn.Parameter) else None


def _floating(*ts: Any) -> str | None:
    """None when the tensors can be emulated, else why not."""
    ts = tuple(t for t in ts if isinstance(t, torch.Tensor))
    if any(t.is_complex() for t in ts):
        return "complex tensors"
    if not any(t.is_floating_point() for t in ts):
        return "integer tensors"
    return None


def _gemm(em: Emulation, kind: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None,
          out_fmt: str | None = None, alpha: float = 1.0) -> torch.Tensor:
    """The emulated ``a @ b (+ c)`` for (..., M, K) @ (..., K, N) or (..., M, K) @ (K, N)."""
    r, ad = em.effective(a)
    pa, pb = _param(a), _param(b)
    weight = pb if pb is not None else pa
    ds = em.delayed_for(weight)
    names: tuple[str | None, str | None]
    if pb is not None:
        names = ("input", "weight")
    elif pa is not None:
        names = ("weight", "input")
    else:
        names = (None, None)
    ga_fmt = r.wgrad_fmt if pa is not None else r.out_fmt
    gb_fmt = r.wgrad_fmt if pb is not None else r.out_fmt
    batch = prod(batch_shape(a, b))
    flops = 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
    s = GemmSpec(em, r, kind, out_fmt or r.out_fmt, ga_fmt, gb_fmt, ds, names[0] if ds else None,
              names[1] if ds else None, alpha, ad, flops)
    s.weight_a, s.weight_b = pa is not None, pb is not None  # branch nvfp4: 2-D weight tiles, RHT
    return GemmFunction.apply(a, b, c, s)


def _left(em: Emulation, kind: str, func: Any, args: tuple, kwargs: dict, reason: str,
          flops: int, inputs: tuple = ()) -> Any:
    """Run an op with torch, count it (forward now, its backward products when they run)."""
    out = func(*args, **kwargs)
    em.report.left(kind, "forward", flops, reason)
    nbwd = sum(1 for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad)
    if isinstance(out, torch.Tensor) and out.requires_grad and nbwd:
        out = TapFunction.apply(out, em, kind, flops * nbwd, reason)
    return out


def _bind(args: tuple, kwargs: dict, names: list[str], defaults: dict) -> dict:
    out = dict(defaults)
    out.update(zip(names, args))
    out.update(kwargs)
    return out


def _matmul(em: Emulation, kind: str, a: torch.Tensor, b: torch.Tensor, out_fmt: str | None = None,
            alpha: float = 1.0) -> torch.Tensor:
    """torch.matmul's shapes (1-D operands, broadcast batch axes) on the emulated GEMM."""
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D")
    sq_a, sq_b = a.ndim == 1, b.ndim == 1
    a2 = a.unsqueeze(0) if sq_a else a
    b2 = b.unsqueeze(-1) if sq_b else b
    if b2.ndim == 2:  # one weight for every row: one GEMM over the flattened rows
        y = _gemm(em, kind, a2.reshape(-1, a2.shape[-1]), b2, None, out_fmt, alpha)
        y = y.reshape(*a2.shape[:-1], b2.shape[-1])
    else:
        batch = batch_shape(a2, b2)
        a3 = a2.expand(*batch, *a2.shape[-2:]) if a2.shape[:-2] != batch else a2
        b3 = b2.expand(*batch, *b2.shape[-2:]) if b2.shape[:-2] != batch else b2
        y = _gemm(em, kind, a3, b3, None, out_fmt, alpha)
    if sq_a:
        y = y.squeeze(-2)
    if sq_b:
        y = y.squeeze(-1)
    return y


# ------------------------------------------------------------------ op handlers
def _h_linear(em: Emulation, func: Any, args: tuple, kwargs: dict) -> Any:
    p = _bind(args, kwargs, ["input", "weight", "bias"], {"bias": None})
    x, w, b = p["input"], p["weight"], p["bias"]
    why = _floating(x, w, b)
    k = x.shape[-1] if x.ndim else 1
    flops = 2 * (x.numel() // max(k, 1)) * k * w.shape[0]
    if why:
        return _left(em, "linear", func, args, kwargs, why, flops, (x, w))
    if x.ndim == 0 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
        return func(*args, **kwargs)  # torch's own error for shapes that do not fit
    return linear(em, "linear", x, w, b)


def linear(em: Emulation, kind: str, x: torch.Tensor, w: torch.Tensor,
            b: torch.Tensor | None) -> torch.Tensor:
    x2 = x.reshape(-1, x.shape[-1])
    y = _gemm(em, kind, x2, w.t(), b)
    return y.reshape(*x.shape[:-1], w.shape[0])


def _h_matmul(em: Emulation, func: Any, args: tuple, kwargs: dict) -> Any:
    name = func.__name__
    a, b = (args[1], args[0]) if name == "__rmatmul__" else (args[0], args[1])
    kind = "matmul" if name.startswith("__") else name
    why = _floating(a, b)
    if why or kwargs.get("out") is not None:
        flops = 2 * a.numel() * (b.shape[-1] if b.ndim > 1 else 1)
        return _left(em, kind, func, args, kwargs, why or "out= given", flops, (a, b))
    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
        return func(*args, **kwargs)  # torch's own error for shapes that do not fit
    return _matmul(em, kind, a, b)


def _h_addmm(em: Emulation, func: Any, args: tuple, kwargs: dict) -> Any:
    name = func.__name__
    p = _bind(args, kwargs, ["input", "mat1", "mat2"], {"beta": 1, "alpha": 1, "out": None})
    c, a, b = p["input"], p["mat1"], p["mat2"]
    flops = 2 * a.numel() * b.shape[-1]
    why = _floating(c, a, b)
    if not why and (p["beta"] != 1 or p["alpha"] != 1):
        why = "alpha or beta other than 1"
    if not why and p["out"] is not None:
        why = "out= given"
    if why:
        return _left(em, name, func, args, kwargs, why, flops, (a, b))
    return _gemm(em, name, a, b, c)


def _einsum_plan(eq: str, shapes: list) -> Any:
    """(a permutation, b permutation, (B, M, K, N), output sizes, output permutation) or a reason."""
    eq = eq.replace(" ", "")
    if "." in eq:
        return "einsum with an ellipsis"
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != 2:
        return f"einsum of {len(terms)} operands"
    ta, tb = terms
    if not arrow:
        counts = {ch: (ta + tb).count(ch) for ch in ta + tb}
        out = "".join(sorted(ch for ch, n in counts.items() if n == 1))
    if len(set(ta)) != len(ta) or len(set(tb)) != len(tb) or len(set(out)) != len(out):
        return "einsum with a repeated index"
    if any(len(t) != len(sh) for t, sh in zip(terms, shapes)):
        return "einsum equation and shapes differ"
    size: dict[str, int] = {}
    for t, sh in zip(terms, shapes):
        for ch, n in zip(t, sh):
            if size.setdefault(ch, n) != n:
                return "einsum with broadcast indices"
    batch = [ch for ch in out if ch in ta and ch in tb]
    contr = [ch for ch in ta if ch in tb and ch not in out]
    afree = [ch for ch in ta if ch not in tb]
    bfree = [ch for ch in tb if ch not in ta]
    if any(ch not in out for ch in afree + bfree) or any(ch not in ta + tb for ch in out):
        return "einsum summing an index of one operand"
    pa = [ta.index(ch) for ch in batch + afree + contr]
    pb = [tb.index(ch) for ch in batch + contr + bfree]
    dims = tuple(prod(size[ch] for ch in grp) for grp in (batch, afree, contr, bfree))
    order = batch + afree + bfree
    return pa, pb, dims, [size[ch] for ch in order], [order.index(ch) for ch in out]


def _h_einsum(em: Emulation, func: Any, args: tuple, kwargs: dict) -> Any:
    eq, ops = args[0], list(args[1:])
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = list(ops[0])
    plan = _einsum_plan(eq, [tuple(t.shape) for t in ops]) if isinstance(eq, str) else "einsum sublists"
    why = plan if isinstance(plan, str) else _floating(*ops)
    if why:
        est = 2 * max((t.numel() for t in ops), default=0)
        return _left(em, "einsum", func, args, kwargs, why, est, tuple(ops))
    assert not isinstance(plan, str)
    pa, pb, (nb, m, k, n), osz, operm = plan
    a = ops[0].permute(pa).reshape(nb, m, k)
    b = ops[1].permute(pb).reshape(nb, k, n)
    return _gemm(em, "einsum", a, b).reshape(osz).permute(operm)


def attention(em: Emulation, kind: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              mask: torch.Tensor | None, dropout_p: float, is_causal: bool,
              scale: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Emulated attention (O, P) by the rules of the module docstring; ``mask``: bool
    (True takes part) or float (added)."""
    r, _ = em.effective(q)
    pure = r.policy == "pure"
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    alpha = float(cast(sc, "fp32"))
    s = _matmul(em, kind, q, k.transpose(-2, -1), r.out_fmt if pure else "fp32", alpha)
    if is_causal:
        ll, ss = s.shape[-2:]
        keep = torch.ones(ll, ss, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    p = torch.softmax(s, dim=-1)
    if pure:
        p = RoundFunction.apply(p, r.out_fmt)
        em.report.rounded["softmax"] += 1
    else:
        em.report.kept["softmax"] += 1
    if dropout_p > 0.0:
        p = F.dropout(p, dropout_p, training=True)
    return _matmul(em, kind, p, v), p


def _h_sdpa(em: Emulation, func: Any, args: tuple, kwargs: dict) -> Any:
    p = _bind(args, kwargs, ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"],
              {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None,
               "enable_gqa": False})
    q, k, v = p["query"], p["key"], p["value"]
    kind = "scaled_dot_product_attention"
    why = _floating(q, k, v)
    flops = 2 * q.numel() * k.shape[-2] + 2 * q.numel() // q.shape[-1] * k.shape[-2] * v.shape[-1]
    if why:
        return _left(em, kind, func, args, kwargs, why, flops, (q, k, v))
    if p["enable_gqa"] and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
    return attention(em, kind, q, k, v, p["attn_mask"], float(p["dropout_p"]), bool(p["is_causal"]),
                     p["scale"])[0]


def _as_float_mask(m: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """MHA's masks (bool: True is masked out; float: added) as an additive float mask."""
    if m is None:
        return None
    if m.dtype == torch.bool:
        return torch.zeros(m.shape, dtype=dtype, device=m.device).masked_fill(m, float("-inf"))
    return m.to(dtype)


@functools.lru_cache(maxsize=None)
def _mha_signature() -> tuple[list, dict]:
    """F.multi_head_attention_forward's parameter names and defaults (read once: about
    0.1 ms a call)."""
    params = inspect.signature(F.multi_head_attention_forward).parameters
    return list(params), {n: v.default for n, v in params.items()
                          if v.default is not inspect.Parameter.empty}


def _h_mha(em: Emulation, func: Any, args: tuple, kwargs: dict) -> Any:
    names, defaults = _mha_signature()
    p = _bind(args, kwargs, names, defaults)
    kind = "multi_head_attention_forward"
    query, key, value = p["query"], p["key"], p["value"]
    why = _floating(query, key, value)
    if not why and (p["bias_k"] is not None or p["bias_v"] is not None):
        why = "bias_k / bias_v"
    if not why and (p["add_zero_attn"] or p["static_k"] is not None or p["static_v"] is not None):
        why = "add_zero_attn or static_k / static_v"
    e, h = query.shape[-1], p["num_heads"]
    if why:
        ll = query.shape[0]
        ss = key.shape[0]
        bsz = query.numel() // (ll * e)
        flops = 2 * bsz * (ll + 2 * ss) * e * e + 4 * bsz * ll * ss * e + 2 * bsz * ll * e * e
        return _left(em, kind, func, args, kwargs, why, flops, (query, key, value))
    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
    kpm = p["key_padding_mask"]
    if kpm is not None and not batched:
        kpm = kpm.unsqueeze(0)
    ll, bsz, _ = query.shape
    ss = key.shape[0]
    hd = e // h
    bi = p["in_proj_bias"]
    bq, bk, bv = (None, None, None) if bi is None else bi.chunk(3)
    if not p["use_separate_proj_weight"]:
        w = p["in_proj_weight"]
        if p["query"] is p["key"] and p["key"] is p["value"]:
            q, k, v = linear(em, kind, query, w, bi).chunk(3, dim=-1)
        elif p["key"] is p["value"]:
            wq, wkv = w.split([e, 2 * e])
            q = linear(em, kind, query, wq, bq)
            k, v = linear(em, kind, key, wkv, None if bi is None else bi[e:]).chunk(2, dim=-1)
        else:
            wq, wk, wv = w.chunk(3)
            q, k, v = linear(em, kind, query, wq, bq), linear(em, kind, key, wk, bk), \
                linear(em, kind, value, wv, bv)
    else:
        q = linear(em, kind, query, p["q_proj_weight"], bq)
        k = linear(em, kind, key, p["k_proj_weight"], bk)
        v = linear(em, kind, value, p["v_proj_weight"], bv)

    def heads(t: torch.Tensor, n: int) -> torch.Tensor:  # (n, B, E) -> (B, H, n, hd)
        return t.reshape(n, bsz * h, hd).transpose(0, 1).reshape(bsz, h, n, hd)

    q, k, v = heads(q, ll), heads(k, ss), heads(v, ss)
    am = _as_float_mask(p["attn_mask"], q.dtype)
    if am is not None:
        am = am.reshape(1, 1, ll, ss) if am.dim() == 2 else am.reshape(bsz, h, ll, ss)
    km = _as_float_mask(kpm, q.dtype)
    if km is not None:
        km = km.reshape(bsz, 1, 1, ss)
        am = km if am is None else am + km
    causal = bool(p["is_causal"]) and am is None
    dropout = float(p["dropout_p"]) if p["training"] else 0.0
    o, pw = attention(em, kind, q, k, v, am, dropout, causal, None)
    o = o.permute(2, 0, 1, 3).reshape(ll * bsz, e)
    out = linear(em, kind, o, p["out_proj_weight"], p["out_proj_bias"]).reshape(ll, bsz, e)
    weights = None
    if p["need_weights"]:
        weights = pw.mean(dim=1) if p["average_attn_weights"] else pw
        if not batched:
            weights = weights.squeeze(0)
    if not batched:
        out = out.squeeze(1)
    return out, weights


def _tuple(v: Any, d: int) -> list[int]:
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)] * d


def _h_conv(em: Emulation, func: Any, args: tuple, kwargs: dict) -> Any:
    name = func.__name__
    transposed = "transpose" in name
    order = ["input", "weight", "bias", "stride", "padding"] + \
        (["output_padding", "groups", "dilation"] if transposed else ["dilation", "groups"])
    p = _bind(args, kwargs, order, {"bias": None, "stride": 1, "padding": 0, "dilation": 1,
                                    "groups": 1, "output_padding": 0})
    x, w, b = p["input"], p["weight"], p["bias"]
    d = w.ndim - 2
    batched = x.ndim == d + 2
    groups = int(p["groups"])
    stride, dil = _tuple(p["stride"], d), _tuple(p["dilation"], d)
    k = list(w.shape[2:])
    nb = x.shape[0] if batched else 1
    why = _floating(x, w, b)
    if isinstance(p["padding"], str):
        if p["padding"] == "valid":
            before = after = [0] * d
        elif p["padding"] == "same" and not transposed:
            tot = [dl * (kk - 1) for dl, kk in zip(dil, k)]
            before = [t // 2 for t in tot]
            after = [t - t // 2 for t in tot]
        else:
            why = why or f"padding={p['padding']!r}"
            before = after = [0] * d
    else:
        before = after = _tuple(p["padding"], d)
    if transposed:
        spatial = list(x.shape[-d:])
        flops = 2 * nb * prod(w.shape) * prod(spatial)
    else:
        sp = [n + bb + aa for n, bb, aa in zip(x.shape[-d:], before, after)]
        flops = 2 * nb * prod(w.shape) * prod(ig.conv_out_size(n, kk, s, dl)
                                               for n, kk, s, dl in zip(sp, k, stride, dil))
    if why:
        return _left(em, name, func, args, kwargs, why, flops, (x, w))
    x4 = x if batched else x.unsqueeze(0)
    r, ad = em.effective(x4)
    pw = _param(w)
    ds = em.delayed_for(pw)
    s = GemmSpec(em, r, name, r.out_fmt, r.out_fmt, r.wgrad_fmt, ds, "input" if ds else None,
              "weight" if ds else None, 1.0, ad, flops)
    if transposed:
        op = _tuple(p["output_padding"], d)
        xs = ig.stuff(x4, stride)
        lo = [dl * (kk - 1) - pp for dl, kk, pp in zip(dil, k, before)]
        hi = [lo_ + o_ for lo_, o_ in zip(lo, op)]
        xp = ig.pad(xs, lo, hi)
        y = ConvFunction.apply(xp, ig.flip_weight(w, groups), b, ([1] * d, dil, groups), s)
    else:
        y = ConvFunction.apply(ig.pad(x4, before, after), w, b, (stride, dil, groups), s)
    return y if batched else y.squeeze(0)


def _tensors(x: Any) -> list:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _tensors(y)]
    return []


def _h_not_emulated(em: Emulation, func: Any, args: tuple, kwargs: dict) -> Any:
    """GEMM-like ops floatfmt does not emulate: run by torch, counted with an estimate
    of their FLOPs (recurrent layers: 2 per weight element per time step and row)."""
    name = func.__name__
    ts = _tensors(list(args) + list(kwargs.values()))
    if name.startswith(("lstm", "gru", "rnn")):
        x = ts[0]
        rows = x.numel() // max(x.shape[-1], 1)
        flops = 2 * rows * sum(t.numel() for t in ts[1:] if t.ndim == 2 and t.requires_grad)
    elif name == "bilinear":
        flops = 2 * ts[0].numel() // max(ts[0].shape[-1], 1) * ts[2].numel()
    else:  # addmv, addbmm, addr, outer, tensordot ...: the product of the two largest inputs
        big = sorted((t.numel() for t in ts), reverse=True)[:2] + [1, 1]
        flops = 2 * max(big[0], big[0] * big[1] // max(min(big[0], big[1]), 1))
    return _left(em, name, func, args, kwargs, "not emulated by floatfmt", flops, tuple(ts))


NOT_EMULATED = ("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell",
                "rnn_relu_cell", "bilinear", "addbmm", "addmv", "addr", "chain_matmul", "multi_dot",
                "tensordot", "kron", "inner", "outer", "ger", "vdot", "_scaled_mm")


HANDLERS = {
    "linear": _h_linear, "matmul": _h_matmul, "__matmul__": _h_matmul, "__rmatmul__": _h_matmul,
    "mm": _h_matmul, "bmm": _h_matmul, "mv": _h_matmul, "dot": _h_matmul, "addmm": _h_addmm, "baddbmm": _h_addmm, "einsum": _h_einsum,
    "scaled_dot_product_attention": _h_sdpa, "multi_head_attention_forward": _h_mha,
    **{f"conv{d}d": _h_conv for d in (1, 2, 3)}, **{f"conv_transpose{d}d": _h_conv for d in (1, 2, 3)},
    **{name: _h_not_emulated for name in NOT_EMULATED},
}


