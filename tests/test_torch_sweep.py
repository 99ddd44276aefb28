"""Every float32 bit pattern (all 2**32) through the device (namespace) code of
``ff.cast`` on CPU tensors, against the numpy path, per format (issue 11 item 7).

Slow (tens of minutes per format on one core): it runs only when selected with
``python -m pytest -m slow tests/test_torch_sweep.py``.  The default run holds a
2**20-pattern sample spread over all 2**32, on both paths, nearest-even and toward
zero (tests/test_torch.py), and 2**16 spread patterns in three modes with daz.  Options through
the environment: ``FLOATFMT_SWEEP_FORMATS`` (comma-separated names; default every
registry format), ``FLOATFMT_SWEEP_MODES`` (default ``nearest_even``),
``FLOATFMT_SWEEP_CHUNK`` (log2 of the chunk size, default 22).  Each format prints
its pattern count, mismatch count and time.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.backend.dispatch import force_namespace
from tests.oracles.compare import mismatches

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[torch]')")

FORMATS = [f for f in os.environ.get("FLOATFMT_SWEEP_FORMATS", "").split(",") if f] or ff.formats()
MODES = [m for m in os.environ.get("FLOATFMT_SWEEP_MODES", "").split(",") if m] or ["nearest_even"]


@pytest.fixture(autouse=True)
def _only_when_selected(request):
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the full 2**32 sweep runs only with -m slow")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", FORMATS)
def test_every_float32_pattern_device_code_equals_numpy(name, mode):
    policy = "saturate" if name.startswith(("int", "uint")) else None
    step = 1 << int(os.environ.get("FLOATFMT_SWEEP_CHUNK", "22"))
    base = np.arange(step, dtype=np.uint32)
    bad = total = 0
    t0 = time.perf_counter()
    for start in range(0, 1 << 32, step):
        x = (base + np.uint32(start)).view(np.float32)
        want = ff.cast(x, name, mode, policy)
        with force_namespace():
            got = ff.cast(torch.from_numpy(x), name, mode, policy)
        assert got.dtype == torch.from_numpy(np.asarray(want)).dtype
        bad += int(mismatches(got.numpy(), want).sum())
        total += x.size
        if (start // step) % 64 == 63:  # progress, so a partial run can be reported
            print(f"\nsweep {name} {mode}: {total} of {1 << 32} patterns so far, {bad} mismatches, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(f"\nsweep {name} {mode}: {total} patterns, {bad} mismatches, "
          f"{time.perf_counter() - t0:.0f} s")
    assert total == 1 << 32 and bad == 0
