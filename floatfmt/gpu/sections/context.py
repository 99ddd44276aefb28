"""What a capture section may use from the runner (``floatfmt.gpu.capture``).

The runner's ``Capture`` object provides this; sections are written against the
protocol so they never import the runner (imports point down only).
"""

from __future__ import annotations

import argparse
from typing import Callable, Protocol

from ..device import TorchDevice
from ..fixture import FixtureWriter

__all__ = ["Context", "Task", "Callback"]

# A worker task takes a picklable spec and returns a picklable result; it must be a
# module-level function of an importable module (worker processes are spawned).
Task = Callable[[dict], dict]
Callback = Callable[[dict], None]


class Context(Protocol):
    """The runner as the sections see it."""

    args: argparse.Namespace  # the parsed command line (sweep sizes, --no-cpu-compare ...)
    dry: bool  # a dry run: torch on the CPU, tiny GEMMs
    device: str  # "cuda" or "cpu"
    model: str  # the tensor-core preset predictions use
    deadline: float  # time.time() at which worker tasks give up
    writer: FixtureWriter  # where checks and arrays go
    dev: TorchDevice  # casts and GEMMs on the device
    workers: int  # worker processes (1 when tasks run in this process)
    # (target, device) -> (overflow policy, evidence), filled by the casts section
    policies: dict[tuple[str, str], tuple[str, str]]

    def log(self, msg: str) -> None:
        """Print a progress line (with the elapsed time) and keep it for the README."""

    def submit(self, fn: Task, spec: dict, callback: Callback) -> None:
        """Run ``fn(spec)`` in a worker (or here, without a pool); ``callback`` gets the
        result, ``{"skipped": True}`` past the deadline or ``{"error": ...}``."""

    def finalizer(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` after every worker result has been handed to its callback."""

    def devices(self) -> list[str]:
        """The devices casts run on: the device, and the CPU beside CUDA unless
        ``--no-cpu-compare``."""
