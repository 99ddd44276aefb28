"""What ``emulate`` did: per op kind, the calls and FLOPs it emulated and left alone, and why.

``emulate(model, recipe)`` keeps one ``EmulationReport`` (``floatfmt.torch.report_of(model)``);
it counts from the moment of ``emulate`` (or of ``reset()``), forward and backward apart.

FLOPs are the op's own, two per multiply-add, as torch would compute it:
``2*M*N*K`` per GEMM (batch included), ``2 * N * prod(weight.shape) * prod(spatial)``
per convolution and per each of its two backward products (``spatial``: the output's
for a convolution, the input's for a transposed one; the zeros an implicit GEMM
multiplies are not counted), ``2*L*S*E + 2*L*S*Ev`` per attention head forward and
twice that backward.  A backward product counts only when autograd asks for it.

Ops left alone are the GEMM-like ops the interception saw but did not emulate (each
with its reason: an integer tensor, an option the emulation does not take ...) and
their backward products; ``rounded`` and ``kept`` count the calls of the other ops by
the policy (rounded to the low format, left in fp32).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["EmulationReport", "OpCount"]


@dataclass
class OpCount:
    """Calls and FLOPs of one op kind in one pass (``"forward"`` / ``"backward"``)."""

    calls_emulated: int = 0
    flops_emulated: int = 0
    calls_left: int = 0
    flops_left: int = 0
    reasons: Counter = field(default_factory=Counter)


class EmulationReport:
    """Counts of what an emulated model ran; ``str(report)`` is a table.

    ``gemm_flops()`` gives ``(emulated, left)`` over every GEMM-like op,
    ``fraction_left()`` the share left alone, ``rows()`` the table's rows as dicts.
    """

    def __init__(self, recipe: str, policy: str) -> None:
        self.recipe, self.policy = recipe, policy
        self.ops: dict[tuple[str, str], OpCount] = {}
        self.rounded: Counter = Counter()
        self.kept: Counter = Counter()

    def reset(self) -> None:
        """Forget every count (the warning is not given again for the same model)."""
        self.ops.clear()
        self.rounded.clear()
        self.kept.clear()

    def _row(self, kind: str, phase: str) -> OpCount:
        row = self.ops.get((kind, phase))
        if row is None:  # (not setdefault: an OpCount and its Counter made on every call)
            row = self.ops[(kind, phase)] = OpCount()
        return row

    def emulated(self, kind: str, phase: str, flops: int) -> None:
        """One call of ``kind`` in ``phase`` computed by floatfmt, ``flops`` of work."""
        row = self._row(kind, phase)
        row.calls_emulated += 1
        row.flops_emulated += int(flops)

    def left(self, kind: str, phase: str, flops: int, reason: str) -> None:
        """One call of ``kind`` that torch computed itself, and why."""
        row = self._row(kind, phase)
        row.calls_left += 1
        row.flops_left += int(flops)
        row.reasons[reason] += 1

    def gemm_flops(self) -> tuple[int, int]:
        """(FLOPs emulated, FLOPs left alone) over every GEMM-like op and pass."""
        return (sum(r.flops_emulated for r in self.ops.values()),
                sum(r.flops_left for r in self.ops.values()))

    def fraction_left(self) -> float:
        """The share of GEMM-like FLOPs left alone (0.0 before any)."""
        done, left = self.gemm_flops()
        return left / (done + left) if done + left else 0.0

    def rows(self) -> list[dict]:
        """One dict per (op kind, pass): calls and FLOPs emulated and left, reasons."""
        return [dict(op=k, phase=p, calls_emulated=r.calls_emulated, flops_emulated=r.flops_emulated,
                     calls_left=r.calls_left, flops_left=r.flops_left, reasons=dict(r.reasons))
                for (k, p), r in sorted(self.ops.items())]

    def table(self) -> str:
        """The report as a text table (also ``str(report)``).

        >>> rep = EmulationReport("bf16", "autocast")
        >>> rep.emulated("linear", "forward", 2 * 8 * 4 * 16)
        >>> rep.left("mm", "forward", 64, "integer tensors")
        >>> print(rep.table())  # doctest: +NORMALIZE_WHITESPACE
        floatfmt emulation, recipe bf16, policy autocast
        op      pass      calls emulated  FLOPs emulated  calls left  FLOPs left  why left
        linear  forward                1            1024           0           0
        mm      forward                0               0           1          64  integer tensors (1)
        GEMM-like FLOPs emulated: 1024 of 1088 (94.118%)
        """
        head = ["op", "pass", "calls emulated", "FLOPs emulated", "calls left", "FLOPs left", "why left"]
        body = [[k, p, str(r.calls_emulated), str(r.flops_emulated), str(r.calls_left),
                 str(r.flops_left), "; ".join(f"{w} ({n})" for w, n in sorted(r.reasons.items()))]
                for (k, p), r in sorted(self.ops.items())]
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        right = {2, 3, 4, 5}

        def line(cells: list[str]) -> str:
            return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        out = [f"floatfmt emulation, recipe {self.recipe}, policy {self.policy}", line(head)]
        out += [line(b) for b in body]
        done, left = self.gemm_flops()
        share = f" ({100.0 * done / (done + left):.3f}%)" if done + left else ""
        out.append(f"GEMM-like FLOPs emulated: {done} of {done + left}{share}")
        if self.rounded:
            out.append("rounded to the low format (policy): "
                       + ", ".join(f"{k} {n}" for k, n in sorted(self.rounded.items())))
        if self.kept:
            out.append("kept in fp32 (policy): "
                       + ", ".join(f"{k} {n}" for k, n in sorted(self.kept.items())))
        return "\n".join(out)

    __str__ = table

    def __repr__(self) -> str:
        done, left = self.gemm_flops()
        return f"<EmulationReport {self.recipe}: {done} GEMM FLOPs emulated, {left} left>"
