"""FP8 delayed scaling: per-tensor scales from an amax history (Transformer Engine style)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.formats import FormatLike, get_format
from ..backend.namespace import is_tensor
from ..core.intake import to_exact
from ..scaling.quantize import quantize
from ..scaling.quantized_tensor import choose
from ..scaling.scales import fp32_scale

__all__ = ["DelayedScaling"]


class DelayedScaling:
    """Per-tensor FP8 scales from an amax history, as Transformer Engine's
    ``DelayedScaling`` recipe keeps them.

    Each named tensor has a scale (dequantisation multiplier, initially 1) and a
    window of the last ``history_len`` amax values.  ``quantize(name, x)`` casts with
    the *current* scale (values past the format's range saturate) and records
    ``amax(x)``; ``update()`` (once per training step) pushes the recorded amax into
    the window and sets ``scale = amax_ref * 2**margin / fmt.max`` (fp32), where
    ``amax_ref`` is the window's maximum (``algo="max"``) or its newest entry
    (``"most_recent"``).  Forward tensors use ``fwd_format`` (E4M3), gradients
    ``bwd_format`` (E5M2): TE's HYBRID format.  (TE's default window is 1024 steps.)

    ``amax_reduction``: data-parallel training (TE's ``reduce_amax`` over its
    ``fp8_group``).  A callable given the recorded amaxes of one ``update`` (a list of
    floats, in the order of the sorted tensor names) and returning the list to use
    instead, e.g. their maximum over every rank
    (``floatfmt.torch.amax_all_reduce(group)``), so that all ranks compute the same
    scales; None (the default): each rank its own amax.

    Non-finite and empty tensors follow TE's amax kernel and its
    ``amax_and_scale_update``: ``amax(x)`` is the largest ``|x|`` over the elements
    that are not NaN (NaN elements are skipped, as ``fmaxf`` skips them; an Inf makes
    amax Inf; a tensor with no elements, or only NaN, has amax 0).  That amax enters
    the window as it is, Inf included.  ``update`` keeps the previous scale whenever
    ``amax_ref`` is not a finite positive number: after an Inf, for as long as the
    Inf stays in the window under ``"max"`` (``history_len`` updates), and for one
    update under ``"most_recent"``; after an all-zero or empty step while the
    reference is 0.

    >>> ds = DelayedScaling(history_len=4)
    >>> q = ds.quantize("w", [1.0, -2.0, 896.0])   # scale 1: 896 saturates to 448
    >>> q.dequantize().tolist(), ds.update()["w"]
    ([1.0, -2.0, 448.0], 2.0)
    >>> ds.quantize("w", [1.0, -2.0, 896.0]).dequantize().tolist()
    [1.0, -2.0, 896.0]
    """

    ALGOS = ("max", "most_recent")

    def __init__(self, history_len: int = 16, algo: str = "max", margin: int = 0,
                 fwd_format: FormatLike = "fp8_e4m3", bwd_format: FormatLike = "fp8_e5m2",
                 pow2_scale: bool = False, amax_reduction: Any = None) -> None:
        if not isinstance(history_len, (int, np.integer)) or history_len < 1:
            raise ValueError(f"history_len must be a positive integer, not {history_len!r}")
        self.history_len = int(history_len)
        self.algo = choose("algo", algo, self.ALGOS)
        if not isinstance(margin, (int, np.integer)) or isinstance(margin, bool):
            raise TypeError(f"margin must be an integer, not {type(margin).__name__}")
        self.margin = int(margin)
        self.formats = {"forward": get_format(fwd_format), "backward": get_format(bwd_format)}
        self.pow2_scale = bool(pow2_scale)
        if amax_reduction is not None and not callable(amax_reduction):
            raise TypeError("amax_reduction must be a callable (list of amaxes -> list), not "
                            f"{type(amax_reduction).__name__}")
        self.amax_reduction = amax_reduction
        self._scale: dict[str, float] = {}
        self._history: dict[str, list[float]] = {}
        self._pending: dict[str, float] = {}
        self._role: dict[str, str] = {}
        self.clip_fraction: dict[str, float] = {}

    def scale(self, name) -> float:
        """Current dequantisation scale of tensor ``name`` (1.0 before its first update)."""
        return self._scale.get(name, 1.0)

    def history(self, name) -> list[float]:
        """The amax window of ``name``, oldest first."""
        return list(self._history.get(name, []))

    def quantize(self, name, x, role="forward", rounding="nearest_even", rng=None):
        """Quantise ``x`` with ``name``'s current scale; record its amax for ``update``."""
        role = choose("role", role, ("forward", "backward"))
        if self._role.setdefault(name, role) != role:
            raise ValueError(f"tensor {name!r} was registered as {self._role[name]}, not {role}")
        fmt = self.formats[role]
        s = self.scale(name)
        if is_tensor(x):  # on its own device (no host copy): the same two statistics
            a = x.detach().abs()
            amax = float(a.nan_to_num(nan=0.0, posinf=math.inf).amax()) if a.numel() else 0.0
            clipped = float((a > fmt.max * s).double().mean()) if a.numel() else 0.0
        else:
            v = np.asarray(to_exact(x).values)
            amax = float(np.fmax.reduce(np.abs(v), axis=None, initial=0.0))  # NaN skipped, Inf kept
            clipped = float(np.mean(np.abs(v) > fmt.max * s)) if v.size else 0.0
        self._pending[name] = max(self._pending.get(name, 0.0), amax)
        q = quantize(x, fmt, scale=s, rounding=rounding, rng=rng)
        self.clip_fraction[name] = clipped
        return q

    def update(self) -> dict[str, float]:
        """End of a step: roll every window, recompute the scales; returns them.
        With ``amax_reduction``, the recorded amaxes are replaced by what it returns
        first (one call per update, with every rank's tensors in the same order)."""
        if self.amax_reduction is not None and self._pending:
            names = sorted(self._pending)
            got = [float(a) for a in self.amax_reduction([self._pending[n] for n in names])]
            if len(got) != len(names):
                raise ValueError(f"amax_reduction returned {len(got)} values for "
                                 f"{len(names)} amaxes")
            self._pending = dict(zip(names, got))
        for name, amax in self._pending.items():
            h = self._history.setdefault(name, [])
            h.append(amax)
            del h[:-self.history_len]
            ref = max(h) if self.algo == "max" else h[-1]
            if ref > 0 and math.isfinite(ref):  # else the previous scale stays (as TE)
                fmt = self.formats[self._role[name]]
                self._scale[name] = float(fp32_scale(ref * 2.0 ** self.margin / fmt.max,
                                                      self.pow2_scale))
        self._pending.clear()
        return dict(self._scale)

    def __repr__(self):
        return (f"DelayedScaling(history_len={self.history_len}, algo={self.algo!r}, "
                f"margin={self.margin}, tensors={sorted(self._scale)})")
