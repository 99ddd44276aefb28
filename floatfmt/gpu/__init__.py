"""Checking floatfmt against real GPUs.

``capture``  runs on a CUDA machine with torch (``python -m floatfmt.gpu.capture
             --out DIR``): the runner (command line, worker pool, fixture
             writing, environment, summary).
``sections`` what the capture measures, one module per section (casts, tf32,
             probes, random, sweep), each next to floatfmt's prediction; a new
             section is a module there plus one line in its registry.
``device``   the torch side: codes into tensors, casts and GEMMs, codes back.
``compare``  replays recorded fixtures (``tests/data/gpu/*/``) against the
             emulator on any machine (``floatfmt gpu-report``).
``probes``   the inputs both sides build identically.
``fixture``  the fixture folder format (summary.json + compressed .npz).

Nothing here imports torch at import time.
"""

from .compare import compare_fixture, report_main
from .fixture import Fixture, find_fixtures

__all__ = ["compare_fixture", "report_main", "Fixture", "find_fixtures"]
