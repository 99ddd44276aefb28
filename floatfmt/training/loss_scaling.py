"""Loss scaling: ``LossScaler``, the state machine of PyTorch's ``GradScaler``."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..core.cast import cast
from ..core.formats import get_format
from ..backend.namespace import is_tensor, namespace
from ..scaling.quotients import mul_fp64

__all__ = ["LossScaler"]

_FP32 = get_format("fp32")


class LossScaler:
    """Loss scaling with the state machine of PyTorch's ``torch.amp.GradScaler``.

    ``scale(loss)`` multiplies by the current scale S; backpropagate the scaled loss;
    ``unscale(grads)`` returns the gradients times 1/S and whether any is Inf/NaN;
    ``update()`` then (dynamic mode):

    * overflow found: ``S *= backoff_factor``, the growth counter resets, and the step
      must be skipped (``skip`` is True);
    * otherwise the counter grows; when it reaches ``growth_interval``,
      ``S *= growth_factor`` (kept only if finite in fp32) and the counter resets.

    S is an fp32 value, as in PyTorch.  ``dynamic=False`` keeps S fixed (a static
    loss scale) but still reports overflow so the step can be skipped.

    >>> ls = LossScaler(init_scale=2.0**16, growth_interval=2)
    >>> ls.scale(0.5)
    32768.0
    >>> _, bad = ls.unscale([np.array([np.inf])]); ls.update(); ls.get_scale()
    32768.0
    >>> for _ in range(2): _ = ls.unscale([np.array([1.0])]); ls.update()
    >>> ls.get_scale()
    65536.0
    """

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 dynamic: bool = True) -> None:
        if not (isinstance(init_scale, (int, float, np.floating, np.integer)) and init_scale > 0):
            raise ValueError(f"init_scale must be a positive number, not {init_scale!r}")
        if not growth_factor > 1.0:
            raise ValueError(f"growth_factor must be > 1, not {growth_factor!r}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"backoff_factor must be in (0, 1), not {backoff_factor!r}")
        if not isinstance(growth_interval, (int, np.integer)) or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive integer, not {growth_interval!r}")
        self._scale = float(cast(init_scale, _FP32))
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.dynamic = bool(dynamic)
        self.growth_tracker = 0
        self._found_inf: bool | None = None
        self.history: list[dict] = []

    def get_scale(self) -> float:
        return self._scale

    def scale(self, loss):
        """``loss * S`` (rounded once to float64; exact for power-of-two S)."""
        out = mul_fp64(np.asarray(loss, np.float64), self._scale)
        return float(out) if np.ndim(out) == 0 else out

    def unscale(self, grads):
        """(grads * fp32(1/S), found_inf).  ``grads``: an array or tensor, or a list of them
        (tensors stay on their device: a float64 multiply there rounds once, as on numpy)."""
        single = isinstance(grads, np.ndarray) or np.isscalar(grads) or is_tensor(grads)
        gl = [grads] if single else list(grads)
        inv = float(cast(Fraction(1) / Fraction(self._scale), _FP32)) if self._scale else math.inf
        out, found = [], False
        for g in gl:
            if is_tensor(g):  # on its own device: IEEE float64 multiply rounds once, as mul_fp64
                u = g.detach().to(namespace(g).t.float64) * inv
                found = found or not bool(namespace(g).t.isfinite(u).all())
            else:
                u = mul_fp64(np.asarray(g, np.float64), inv)
                found = found or not bool(np.all(np.isfinite(u)))
            out.append(u)
        self._found_inf = found
        return (out[0] if single else out), found

    @property
    def skip(self) -> bool:
        """Whether the last ``unscale`` found Inf/NaN (the optimizer step must be skipped)."""
        return bool(self._found_inf)

    def update(self, found_inf=None):
        """Advance the state machine (call once per step, after ``unscale``)."""
        found = self._found_inf if found_inf is None else bool(found_inf)
        if found is None:
            raise RuntimeError("update() needs found_inf: call unscale() first or pass it")
        before = self._scale
        if self.dynamic:
            if found:
                self._scale = float(cast(Fraction(self._scale) * Fraction(self.backoff_factor), _FP32))
                self.growth_tracker = 0
            else:
                self.growth_tracker += 1
                if self.growth_tracker == self.growth_interval:
                    new = float(cast(Fraction(self._scale) * Fraction(self.growth_factor), _FP32))
                    if math.isfinite(new):
                        self._scale = new
                    self.growth_tracker = 0
        self.history.append({"scale": before, "found_inf": found, "new_scale": self._scale,
                             "growth_tracker": self.growth_tracker})
        self._found_inf = None

    def state_dict(self) -> dict:
        return {"scale": self._scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self.growth_tracker}

    def __repr__(self):
        mode = "dynamic" if self.dynamic else "static"
        return f"LossScaler({mode}, scale={self._scale:g}, growth_tracker={self.growth_tracker})"
