"""A tiny mixed-precision training loop: an MLP on two spirals, backprop by hand.

Every tensor of the loop lives in a format chosen by a precision ``Policy``,
and every rounding goes through floatfmt's one routine:

* matmuls, forward and backward, are ``ff.matmul`` with the policy's accumulation
  model: a tensor-core preset (``Policy.model``, e.g. ``"h100"``: blocks of L
  products fused, aligned, truncated and rounded as the matrix unit does, into an
  ``acc`` accumulator) or, with ``model=None``, the sequential accumulator
  (``acc = round(acc + a_k * b_k)`` in ``acc`` for every product).  Operands are
  first rounded to the policy's operand format; FP8 operands are quantised with
  per-tensor delayed scaling (E4M3 forward / E5M2 for gradients): the matmul takes
  the FP8 values and the two per-tensor scales multiply the accumulator in the
  epilogue (``alpha = scale_a * scale_b``), as an FP8 GEMM does.  The
  accumulator's value is then rounded to the output format (a GPU epilogue).
  The FP8 policy uses the sequential fp32 accumulator: its backward matmuls
  multiply E4M3 by E5M2 values, and ``ff.matmul`` takes one operand format (fp16
  holds both exactly, so it is passed; the products stay exact).
* bias gradients (column sums) are exact sums rounded once to ``acc``; with a
  low-precision ``acc`` blocks of ``acc_block`` (16) terms are summed exactly and
  each block sum is added to the accumulator with one rounding.
* sums (bias, momentum, weight update) are exact (``floatfmt.arith.eft.exact_sum``)
  and rounded once; elementwise products and ``tanh`` are computed in float64
  and rounded once.
* the loss and the softmax stay fp32, the optimizer state (momentum) is fp32;
  weights are an fp32 master copy, or (``master=False``) stored in the low format.

The problem's gradients are small on purpose: the loss is multiplied by
``loss_weight = 2**-16`` (and the learning rate divided by it, which changes
nothing in exact arithmetic), so that gradients sit around 1e-7 to 1e-9, as a
large network's often do.  That is what makes FP16 without loss scaling lose
them (its smallest subnormal is 2**-24, about 6e-8).

    >>> r = train("bf16", steps=5, n_points=64, hidden=16)
    >>> len(r.loss), r.policy.name
    (5, 'bf16')
"""

# size: one story, policy -> run -> hand-written forward and backward -> loop -> result, that a reader follows a gradient through best in one file (each function stays under 80 lines)
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, fields, replace

import numpy as np

from ..arith.accumulate import matmul as _ff_matmul
from ..arith.eft import exact_sum
from ..core.intake import holds
from ..core.block_formats import is_block_format
from ..core.formats import Format, get_format
from ..core.names import unknown_name
from ..core.rounding import round_values
from .delayed_scaling import DelayedScaling
from .loss_scaling import LossScaler
from .mx_gemms import mx_gemm_operands

__all__ = ["Policy", "POLICIES", "TrainConfig", "TrainResult", "train", "train_all", "spirals", "cli_train",
           "summary_table"]


@dataclass(frozen=True)
class Policy:
    """Which format each kind of tensor uses.

    matmul : operand format of the forward matmuls (``"fp8_e4m3"`` means FP8 with
        per-tensor delayed scaling).
    activations : format of activations, biases and other forward tensors.
    grads : format of gradients (activation gradients, weight gradients).
    grad_matmul : operand format of the backward matmuls' gradient operand.
    acc : accumulator format of every matmul.
    model : the matmuls' accumulation model: a tensor-core preset name (``"h100"``:
        the unit's fused, truncated blocks of products) or None (the sequential
        accumulator: every product added to ``acc`` with one rounding).
    master : keep fp32 master weights (False: the weights themselves are stored in
        ``activations``' format and every update is rounded to it; gradients and the
        momentum stay fp32).
    loss_scaling : None, ``"dynamic"`` (``LossScaler``) or ``"static"``.
    """

    name: str
    description: str
    matmul: str = "fp32"
    activations: str = "fp32"
    grads: str = "fp32"
    grad_matmul: str = "fp32"
    acc: str = "fp32"
    master: bool = True
    loss_scaling: str | None = None
    model: str | None = "h100"


POLICIES = {p.name: p for p in [
    Policy("fp32", "everything fp32 (sequential fp32 accumulation, as CUDA cores do)",
           model=None),
    Policy("tf32", "matmul operands rounded to TF32, everything else fp32", matmul="tf32",
           grad_matmul="tf32"),
    Policy("bf16", "bf16 tensors, fp32 accumulation, fp32 master weights, no loss scaling",
           "bf16", "bf16", "bf16", "bf16"),
    Policy("fp16", "fp16 tensors, fp32 master weights, dynamic loss scaling",
           "fp16", "fp16", "fp16", "fp16", loss_scaling="dynamic"),
    Policy("fp16_static", "fp16 with a static loss scale of 2**16",
           "fp16", "fp16", "fp16", "fp16", loss_scaling="static"),
    Policy("fp16_no_scaling", "fp16 without loss scaling: small gradients underflow",
           "fp16", "fp16", "fp16", "fp16"),
    Policy("fp16_acc16", "fp16 with fp16 accumulators (each 16-product H100 MMA step rounded "
           "to fp16)", "fp16", "fp16", "fp16", "fp16", acc="fp16", loss_scaling="dynamic"),
    Policy("fp16_no_master", "fp16 with dynamic loss scaling, but the weights are stored and "
           "updated in fp16 (no fp32 master copy)",
           "fp16", "fp16", "fp16", "fp16", master=False, loss_scaling="dynamic"),
    Policy("fp8", "FP8 matmuls (E4M3 forward, E5M2 gradients, delayed per-tensor scaling, "
           "sequential fp32 accumulation), bf16 elsewhere", "fp8_e4m3", "bf16", "bf16",
           "fp8_e5m2", model=None),
    Policy("mxfp8", "MX FP8 matmuls (E4M3 elements, an E8M0 scale per 32 values along each "
           "GEMM's reduction axis, sequential fp32 accumulation), bf16 elsewhere",
           "mxfp8_e4m3", "bf16", "bf16", "mxfp8_e4m3", model=None),
]}


def spirals(n=256, seed=0, turns=1.5, noise=0.04):
    """Two interleaved spirals: ``(X, y)`` with X of shape (n, 2) in about [-1, 1]."""
    rng = np.random.default_rng(seed)
    m = n // 2
    t = np.sqrt(rng.random(m)) * turns * 2 * np.pi
    r = t / (turns * 2 * np.pi)
    xs = []
    for c in (0, 1):
        th = t + c * np.pi
        xs.append(np.c_[r * np.cos(th), r * np.sin(th)] + noise * rng.standard_normal((m, 2)))
    return np.vstack(xs), np.r_[np.zeros(m, np.int64), np.ones(m, np.int64)]


@dataclass(frozen=True)
class TrainConfig:
    """The knobs of a run besides its policy and length (``train(..., config=...)`` or
    the same names as keywords of ``train``).

    seed : data and initial weights.  n_points : spiral points.  hidden : layer width.
    lr, momentum : SGD with momentum.  loss_weight : multiplies the loss (and divides the
    learning rate): the knob that puts the gradients where FP16 loses them.
    init_scale, growth_interval : the ``LossScaler`` of loss-scaling policies.
    history_len : the FP8 amax window (``DelayedScaling``).
    anneal_at, anneal_factor : the learning rate drops by ``anneal_factor`` after
    ``anneal_at`` of the steps.  acc : overrides the policy's accumulator format.
    acc_block : terms summed exactly per block of a low-precision bias-gradient sum.
    keep_grads : keep every gradient value of the first step (``first_grads``).
    """

    seed: int = 0
    n_points: int = 256
    hidden: int = 64
    lr: float = 0.2
    momentum: float = 0.9
    loss_weight: float = 2.0 ** -16
    init_scale: float = 2.0 ** 16
    growth_interval: int = 100
    history_len: int = 16
    anneal_at: float = 2 / 3
    anneal_factor: float = 0.05
    acc: str | None = None
    acc_block: int = 16
    keep_grads: bool = False

    def anneal_step(self, steps: int) -> int:
        """The first step of the annealing phase (small learning rate)."""
        return int(round(self.anneal_at * steps))


@dataclass(frozen=True)
class TrainResult:
    """Per-step records of one training run (arrays of length ``steps``), by name.

    loss, accuracy : of the forward pass at that step (before its update).
    underflow : fraction of gradient values that rounding flushed to zero (of those
        nonzero before rounding), over every gradient tensor of the step.
    overflow : a gradient was Inf/NaN; skipped : the update was skipped for it.
    loss_scale : the loss scale used (1 without loss scaling).
    lost_updates : fraction of weights whose nonzero update rounded away entirely.
    final_loss, final_accuracy : of the trained weights.
    frozen : fraction of parameters that did not change at all during the annealing
        phase (the last ``1 - anneal_at`` of the steps, where the learning rate is small).
    anneal_step : the first step of that phase.
    params : the final parameters (three weight matrices, then three bias vectors).
    seconds : wall-clock time of the run.
    config : the ``TrainConfig`` of the run.
    first_grads : with ``keep_grads=True``, every gradient value of the first step (weights
        and biases, of the unscaled loss, as the policy computed them), flattened.
    """

    policy: Policy
    config: TrainConfig
    loss: np.ndarray
    accuracy: np.ndarray
    underflow: np.ndarray
    overflow: np.ndarray
    skipped: np.ndarray
    loss_scale: np.ndarray
    lost_updates: np.ndarray
    final_loss: float
    final_accuracy: float
    frozen: float
    anneal_step: int
    params: tuple
    seconds: float
    first_grads: np.ndarray | None = None

    def summary(self) -> str:
        p = self.policy
        n = len(self.loss)
        late = slice(n // 2, None)
        lines = [
            f"policy       {p.name}: {p.description}",
            f"steps        {n} in {self.seconds:.2f} s",
            f"final        loss {self.final_loss:.4f}, accuracy {100 * self.final_accuracy:.1f}%",
            f"underflow    {100 * np.mean(self.underflow):.1f}% of gradient values flushed to zero "
            f"(mean over steps)",
            f"overflow     {int(self.overflow.sum())} step(s) with Inf/NaN gradients, "
            f"{int(self.skipped.sum())} skipped",
            f"loss scale   {self.loss_scale[0]:g} -> {self.loss_scale[-1]:g}",
            f"lost updates {100 * np.nanmean(self.lost_updates[late]):.1f}% of weight updates "
            f"rounded away (second half); {100 * self.frozen:.1f}% of the weights never moved "
            f"while the learning rate was annealed",
        ]
        return "\n".join(lines)

    def __repr__(self):
        return (f"TrainResult({self.policy.name}: {len(self.loss)} steps, final loss "
                f"{self.final_loss:.4f}, accuracy {100 * self.final_accuracy:.1f}%)")


# ---------------------------------------------------------------------------------------------
class _Run:
    """The formats of one run and its roundings (all through ``round_values``)."""

    def __init__(self, policy: Policy, ds: DelayedScaling | None, acc_block: int):
        self.p = policy
        self.fp32 = get_format("fp32")
        self.act = get_format(policy.activations)
        self.grad = get_format(policy.grads)
        self.acc = get_format(policy.acc)
        self.fp8 = policy.matmul.startswith("fp8")
        self.mx = is_block_format(policy.matmul)  # MX operands, blocked per GEMM (mxgemm)
        self.mm_fwd = None if (self.fp8 or self.mx) else get_format(policy.matmul)
        self.mm_bwd = None if (self.fp8 or self.mx) else get_format(policy.grad_matmul)
        self.wide_acc = self.acc.mbits >= 23
        self.model = policy.model
        self.acc_block = acc_block
        self.ds = ds
        self.fp8_cache: dict[str, tuple[np.ndarray, float]] = {}
        self.flushed = 0
        self.nonzero = 0

    @staticmethod
    def rnd(x, fmt: Format, src: Format | None = None):
        """Round to fmt (skipped when the values are known to be in ``src`` and fmt holds it)."""
        if src is not None and holds(fmt, src):
            return x
        return round_values(x, fmt)

    def _count(self, exact, rounded):
        nz = exact != 0
        self.nonzero += int(np.count_nonzero(nz))
        self.flushed += int(np.count_nonzero(nz & (rounded == 0)))

    def rnd_grad(self, x, fmt: Format):
        """Round a gradient tensor, counting values flushed to zero."""
        r = round_values(x, fmt)
        self._count(x, r)
        return r

    def add(self, a, b, fmt: Format):
        """``a + b`` rounded once (the exact sum)."""
        t, cls = exact_sum(a, b)
        return round_values(t, fmt, sticky=cls)

    def operand(self, x, fmt, src, name, role):
        """(values in the operand format, per-tensor scale): FP8 values and their
        delayed scale, else ``x`` rounded to ``fmt`` and 1."""
        if self.fp8:
            # one FP8 cast per tensor and step, reused by the forward and backward matmuls
            # (as Transformer Engine keeps the FP8 copies of weights and activations)
            c = self.fp8_cache.get(name)
            if c is None:
                q = self.ds.quantize(name, x, role)
                c = self.fp8_cache[name] = (np.asarray(q.elements, np.float64),
                                            float(q.scale))
            return (c[0] if c[0].shape == x.shape else c[0].T), c[1]  # backward: transposes
        return self.rnd(x, fmt, src), 1.0

    def _accumulate(self, A, B, fmt="fp16", alpha=1.0):
        """The accumulator's value of A @ B: ``ff.matmul`` with the policy's model (a
        tensor-core preset, or None: sequential accumulation in acc), operands of
        ``fmt``, and ``alpha`` times the result in the epilogue."""
        fmt = get_format(fmt)
        if self.model is not None:
            return _ff_matmul(A, B, fmt, acc_fmt=self.acc, model=self.model, alpha=alpha)
        return _ff_matmul(A, B, fmt, acc_fmt=self.acc, alpha=alpha)

    def matmul(self, a, b, out: Format, fa, fb, srca, srcb, na, nb, ra, rb, grad=False,
               gemm=None):
        """``a @ b``: operands rounded to fa / fb (FP8: quantised with delayed scaling,
        names na / nb, roles ra / rb; MX: blocked along the reduction axis of ``gemm``),
        accumulated by the policy's model in acc, rounded to ``out``."""
        if self.mx:
            A, B = self.mx_operands(a, b, gemm)
            R = self._accumulate(A, B, "fp32")  # MX values of bf16 data are fp32 values
        else:
            A, sa = self.operand(a, fa, srca, na, ra)
            B, sb = self.operand(b, fb, srcb, nb, rb)
            fmt = "fp16" if self.fp8 else fa  # fp16 holds E4M3 and E5M2 values exactly
            alpha = float(round_values(np.float64(sa * sb), self.fp32)) if self.fp8 else 1.0
            R = self._accumulate(A, B, fmt, alpha)
        r = self.rnd(R, out, self.acc)
        if grad:
            self._count(R, r)
        return r

    def mx_operands(self, a, b, gemm):
        """(A, B) with ``A @ B`` the MX version of ``a @ b``, each operand blocked along the
        reduction axis of the training GEMM ``gemm`` (``floatfmt.training.mx_gemms``).  The loop keeps
        W as K x N and computes ``x @ W``, so: forward ``a = X``, ``b = W^T``;
        grad_weight ``a = X^T``, ``b = dY``; grad_input ``a = dY``, ``b = W``."""
        mm, gm = self.p.matmul, self.p.grad_matmul
        if gemm == "forward":
            qx, qw = mx_gemm_operands("forward", a, b.T, mm)
            return qx.dequantize(), qw.dequantize().T
        if gemm == "grad_weight":
            qdy, qx = mx_gemm_operands("grad_weight", b, a.T, gm, mm)
            return qx.dequantize().T, qdy.dequantize()
        if gemm == "grad_input":
            qdy, qw = mx_gemm_operands("grad_input", a, b, gm, mm)
            return qdy.dequantize(), qw.dequantize()
        raise ValueError(f"an MX policy needs the GEMM of every matmul, not {gemm!r}")

    def colsum(self, d, out: Format):
        """Column sums (bias gradients), accumulated like a matmul, counted as gradients."""
        P = d.sum(axis=0)
        if self.wide_acc:
            R = round_values(P, self.acc)
        else:
            R = None
            for j in range(0, d.shape[0], self.acc_block):
                part = d[j:j + self.acc_block].sum(axis=0)
                R = round_values(part, self.acc) if R is None else self.add(R, part, self.acc)
        r = self.rnd(R, out, self.acc)
        self._count(P, r)
        return r


def _init(sizes, seed):
    rng = np.random.default_rng(seed + 1)
    W = [rng.standard_normal((a, b)) * np.sqrt(1.0 / a) for a, b in zip(sizes[:-1], sizes[1:])]
    W[0] *= 3.0  # a wider first layer resolves the spiral's turns sooner
    return W, [np.zeros(s) for s in sizes[1:]]


def train(policy: str | Policy = "bf16", steps: int = 300, config: TrainConfig | None = None,
          *, progress=None, **options) -> TrainResult:
    """Train the 2 -> hidden -> hidden -> 2 tanh MLP on ``spirals`` with full-batch SGD
    (momentum) under ``policy`` (a name from ``POLICIES`` or a ``Policy``).

    ``config`` (a ``TrainConfig``) holds the other knobs; ``options`` override its fields
    by name (``train("fp16", 150, init_scale=2.0**40)``).  Deterministic for a given seed.
    ``loss_weight`` multiplies the loss (and divides the learning rate): the knob that
    puts the gradients where FP16 loses them.  The learning rate drops by
    ``anneal_factor`` after ``anneal_at`` of the steps (a step schedule's annealing
    phase, where updates are small).  ``acc`` overrides the policy's accumulator format
    (the matmuls fall back to the sequential accumulator when the policy's tensor-core
    model has no such accumulator); a low-precision accumulator adds bias-gradient sums
    in blocks of ``acc_block`` terms with one rounding each.
    ``progress(step, steps, record)`` is called after every step when given.

    >>> r = train("fp32", steps=3, n_points=32, hidden=8)
    >>> r.loss_scale.tolist(), bool(r.underflow.max() == 0)
    ([1.0, 1.0, 1.0], True)
    """
    cfg = _config(config, options)
    policy = _resolve_policy(policy, cfg.acc)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive integer, not {steps!r}")
    t0 = time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore"):  # Inf/NaN gradients are recorded, not warned
        st = _State.start(policy, cfg, steps)
        rec = {k: np.zeros(steps) for k in _RECORDS}
        for step in range(steps):
            for k, v in _step(st, step).items():
                rec[k][step] = v
            if progress is not None:
                progress(step, steps, {k: v[step] for k, v in rec.items()})
        return _result(st, rec, time.perf_counter() - t0)


_RECORDS = ("loss", "accuracy", "underflow", "overflow", "skipped", "loss_scale", "lost_updates")


def _config(config: TrainConfig | None, options: dict) -> TrainConfig:
    if config is None:
        config = TrainConfig()
    elif not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, not {type(config).__name__}")
    names = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise TypeError(f"train() got unexpected keyword argument(s) {unknown}; "
                        f"valid: progress, {', '.join(sorted(names))}")
    return replace(config, **options)


def _resolve_policy(policy, acc) -> Policy:
    """The ``Policy`` of a name or a Policy, with ``acc`` overriding its accumulator and
    the tensor-core model dropped when the preset has no such formats."""
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise unknown_name("policy", policy, POLICIES, n=2)
        policy = POLICIES[policy]
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a name or a Policy, not {type(policy).__name__}")
    if acc is not None:
        policy = replace(policy, name=f"{policy.name}+acc_{get_format(acc).name}",
                         acc=get_format(acc).name)
    if policy.model is not None:
        from ..arith.matrixunit.tensorcore import get_model
        try:  # a tensor-core preset must have these operand and accumulator formats
            get_model(policy.model, policy.matmul, policy.acc)
        except ValueError:
            policy = replace(policy, model=None)
    return policy


@dataclass
class _State:
    """Everything a run carries from step to step."""

    run: _Run
    cfg: TrainConfig
    steps: int
    wfmt: Format  # the stored weights' format
    x_in: np.ndarray
    y: np.ndarray
    Y: np.ndarray
    params: list
    vel: list
    scaler: LossScaler | None
    lr_hi: float
    lr_lo: float
    mom: float
    anneal_step: int
    snapshot: list | None = None
    first: np.ndarray | None = None

    @classmethod
    def start(cls, policy: Policy, cfg: TrainConfig, steps: int) -> _State:
        ds = DelayedScaling(history_len=cfg.history_len) if policy.matmul.startswith("fp8") else None
        run = _Run(policy, ds, cfg.acc_block)
        fp32, low = run.fp32, run.act
        wfmt = fp32 if policy.master else low
        opt = fp32  # gradients for the update and the momentum
        X, y = spirals(cfg.n_points, cfg.seed)
        W, b = _init([2, cfg.hidden, cfg.hidden, 2], cfg.seed)
        params = [run.rnd(v, wfmt) for v in W + b]
        scaler = None
        if policy.loss_scaling is not None:
            scaler = LossScaler(init_scale=cfg.init_scale, growth_interval=cfg.growth_interval,
                                dynamic=policy.loss_scaling == "dynamic")
        lw = cfg.loss_weight
        return cls(run, cfg, steps, wfmt, run.rnd(X, low), y, np.eye(2)[y], params,
                   [np.zeros_like(v) for v in params], scaler,
                   float(run.rnd(np.float64(cfg.lr / lw), opt)),
                   float(run.rnd(np.float64(cfg.lr * cfg.anneal_factor / lw), opt)),
                   float(run.rnd(np.float64(cfg.momentum), opt)), cfg.anneal_step(steps))


def _step(st: _State, step: int) -> dict:
    """One training step: forward, loss, backward, (un)scaling, update; its records."""
    run, cfg = st.run, st.cfg
    run.flushed = run.nonzero = 0
    run.fp8_cache.clear()
    S = st.scaler.get_scale() if st.scaler else 1.0
    hs, logits = _forward(run, st.x_in, st.params, st.wfmt)
    loss, accuracy, p = _loss(logits, st.y)
    # scaled gradient of loss_weight * mean cross-entropy w.r.t. the logits (fp32)
    d = run.rnd((p - st.Y) * (cfg.loss_weight * S / len(st.y)), run.fp32)
    d = run.rnd_grad(d, run.grad)
    grads = _backward(run, hs, st.params, st.wfmt, d)
    overflow = not all(np.all(np.isfinite(g)) for g in grads)
    if cfg.keep_grads and step == 0:
        st.first = np.concatenate([g.ravel() for g in grads]) / S  # S: a power of two
    skipped = False
    if st.scaler is not None:
        grads, found = st.scaler.unscale(grads)  # gradients of the unscaled loss, exact
        grads = [run.rnd_grad(g, run.fp32) for g in grads]  # into the optimizer's format
        skipped = found
        st.scaler.update()
    else:
        grads = [run.rnd(g, run.fp32, run.grad) for g in grads]
    if step == st.anneal_step:
        st.snapshot = [v.copy() for v in st.params]
    lost_updates = np.nan if skipped else _update(st, grads, st.lr_hi if step < st.anneal_step else st.lr_lo)
    if run.ds is not None:
        run.ds.update()
    return {"loss": loss, "accuracy": accuracy, "underflow": run.flushed / max(run.nonzero, 1),
            "overflow": overflow, "skipped": skipped, "loss_scale": S, "lost_updates": lost_updates}


def _update(st: _State, grads, lr: float) -> float:
    """SGD with momentum, every sum rounded once; the fraction of nonzero updates lost."""
    lost = total = 0
    for i, g in enumerate(grads):
        st.vel[i] = st.run.add(st.mom * st.vel[i], g, st.run.fp32)  # fp32 * fp32: exact in float64
        upd = lr * st.vel[i]
        new = st.run.add(st.params[i], -upd, st.wfmt)
        lost += int(np.count_nonzero((upd != 0) & (new == st.params[i])))
        total += int(np.count_nonzero(upd))
        st.params[i] = new
    return lost / max(total, 1)


def _result(st: _State, rec: dict, seconds: float) -> TrainResult:
    frozen = 0.0
    if st.snapshot is not None:
        frozen = sum(int(np.count_nonzero(a == b)) for a, b in zip(st.snapshot, st.params)) / \
            sum(v.size for v in st.params)
    st.run.fp8_cache.clear()
    _, logits = _forward(st.run, st.x_in, st.params, st.wfmt)
    final_loss, final_acc, _ = _loss(logits, st.y)
    return TrainResult(
        policy=st.run.p, config=st.cfg, loss=rec["loss"], accuracy=rec["accuracy"],
        underflow=rec["underflow"], overflow=rec["overflow"].astype(bool),
        skipped=rec["skipped"].astype(bool), loss_scale=rec["loss_scale"],
        lost_updates=rec["lost_updates"], final_loss=final_loss, final_accuracy=final_acc,
        frozen=frozen, anneal_step=st.anneal_step, params=tuple(st.params), seconds=seconds,
        first_grads=st.first if st.cfg.keep_grads else None)


def _forward(run: _Run, x, params, opt):
    W, b = params[:3], params[3:]
    hs = [x]
    for i in range(3):
        wi = W[i] if run.fp8 else run.rnd(W[i], run.act, opt)
        z = run.matmul(hs[-1], wi, run.act, run.mm_fwd, run.mm_fwd, run.act, run.act,
                       f"a{i}", f"w{i}", "forward", "forward", gemm="forward")
        z = run.add(z, run.rnd(b[i], run.act, opt), run.act)
        hs.append(z if i == 2 else run.rnd(np.tanh(z), run.act))
    return hs[:-1], hs[-1]


def _loss(logits, y):
    """Softmax cross-entropy in fp32 (float64 math, rounded once to fp32)."""
    fp32 = get_format("fp32")
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = round_values(e / e.sum(axis=1, keepdims=True), fp32)
    ll = -np.log(np.maximum(p[np.arange(len(y)), y], 1e-45))
    loss = float(round_values(np.float64(np.mean(ll)), fp32))
    if not np.all(np.isfinite(logits)):
        loss = float("nan")
    return loss, float(np.mean(np.argmax(logits, axis=1) == y)), p


def _backward(run: _Run, hs, params, opt, d):
    W = params[:3]
    gW, gb = [None] * 3, [None] * 3
    for i in (2, 1, 0):
        gW[i] = run.matmul(hs[i].T, d, run.grad, run.mm_fwd, run.mm_bwd, run.act, run.grad,
                           f"a{i}", f"d{i}", "forward", "backward", grad=True, gemm="grad_weight")
        gb[i] = run.colsum(d, run.grad)
        if i:
            wi = W[i] if run.fp8 else run.rnd(W[i], run.act, opt)
            dh = run.matmul(d, wi.T, run.grad, run.mm_bwd, run.mm_fwd, run.grad, run.act,
                            f"d{i}", f"w{i}", "backward", "forward", grad=True, gemm="grad_input")
            # tanh' = 1 - h**2: for 16-bit formats the float64 product is exact
            d = run.rnd_grad(dh * (1.0 - hs[i] * hs[i]), run.grad)
    return gW + gb


def train_all(steps=300, policies=None, progress=None, **options) -> dict[str, TrainResult]:
    """``train`` every policy (or the names in ``policies``) with the same options."""
    names = list(POLICIES) if policies is None else list(policies)
    return {n: train(n, steps, progress=progress, **options) for n in names}


def summary_table(results) -> str:
    """One line per run: final loss and accuracy, underflow, skips, lost updates."""
    head = (f"{'policy':<16}{'loss':>9}{'acc %':>8}{'underflow %':>13}{'skipped':>9}"
            f"{'lost upd %':>12}{'frozen %':>10}{'scale':>10}{'seconds':>9}")
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        n = len(r.loss)
        lines.append(f"{name:<16}{r.final_loss:>9.4f}{100 * r.final_accuracy:>8.1f}"
                     f"{100 * np.mean(r.underflow):>13.1f}{int(r.skipped.sum()):>9}"
                     f"{100 * np.nanmean(r.lost_updates[n // 2:]):>12.1f}"
                     f"{100 * r.frozen:>10.1f}{r.loss_scale[-1]:>10g}{r.seconds:>9.2f}")
    return "\n".join(lines)


def _bar(stream):
    def show(step, steps, rec):
        if step % 10 and step != steps - 1:
            return
        width = 30
        done = int(width * (step + 1) / steps)
        stream.write(f"\r[{'#' * done}{'.' * (width - done)}] {step + 1:>4}/{steps}  "
                     f"loss {rec['loss']:.4f}  acc {100 * rec['accuracy']:5.1f}%  "
                     f"scale {rec['loss_scale']:g}   ")
        if step == steps - 1:
            stream.write("\n")
        stream.flush()
    return show


def cli_train(policy="bf16", steps=None, stream=None):
    """``floatfmt train --policy NAME [--steps N]``: progress bar and summary;
    ``--policy all`` trains every policy and prints a table."""
    stream = sys.stdout if stream is None else stream
    steps = 300 if steps is None else steps
    if policy == "all":
        results = {}
        for name in POLICIES:
            stream.write(f"{name}\n")
            results[name] = train(name, steps, progress=_bar(stream))
        stream.write(summary_table(results) + "\n")
        return results
    r = train(policy, steps, progress=_bar(stream))
    stream.write(r.summary() + "\n")
    return r
