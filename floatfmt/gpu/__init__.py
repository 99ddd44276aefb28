"""Checking floatfmt against real GPUs.

``capture``  runs on a CUDA machine with torch (``python -m floatfmt.gpu.capture
             --out DIR``): casts, TF32 operand handling, tensor-core probes and
             random cuBLAS GEMMs, each next to floatfmt's prediction.
``compare``  replays recorded fixtures (``tests/data/gpu/*/``) against the
             emulator on any machine (``floatfmt gpu-report``).
``probes``   the inputs both sides build identically.
``fixture``  the fixture folder format (summary.json + compressed .npz).

Nothing here imports torch at import time.
"""

from .compare import compare_fixture, report_main
from .fixture import Fixture, find_fixtures

__all__ = ["compare_fixture", "report_main", "Fixture", "find_fixtures"]
