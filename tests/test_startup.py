"""What ``import floatfmt`` and a first cast load: not ml_dtypes, torch or matplotlib.

ml_dtypes' import alone costs most of a second, so floatfmt reaches it only when an
ml_dtypes dtype is involved (``floatfmt.core.mldtypes_link``).  Import times themselves are
measured (README, issue 22), not asserted here; what is asserted is which modules load.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("ml_dtypes", "torch", "matplotlib")


def _loaded_after(code: str) -> list[str]:
    """The HEAVY modules in sys.modules after running ``code`` in a fresh interpreter."""
    probe = code + f"\nimport sys; print('LOADED:', *(m for m in {HEAVY!r} if m in sys.modules))"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()[-1].split()[1:]


def test_the_probe_sees_a_module_that_is_loaded():
    assert _loaded_after("import ml_dtypes") == ["ml_dtypes"]


@pytest.mark.parametrize("code", [
    "import floatfmt; floatfmt.cast(0.1, 'bf16')",
    "import floatfmt as ff; import numpy as np\n"
    "ff.cast(np.float32([0.1, 3e38]), 'fp8_e4m3'); ff.cast([0.1, 2**70, '0.1'], 'fp8_e5m3fnu')\n"
    "ff.encode(1.0, 'fp16'); ff.decode(3, 'fp4_e2m1'); ff.info('bf16'); ff.get_format('e5m3fnu')\n"
    "ff.cast(0.1, 'bf16', rounding='stochastic', rng=1)",
])
def test_import_and_cast_leave_out_ml_dtypes_torch_matplotlib(code):
    assert _loaded_after(code) == []


def test_the_cli_show_command_leaves_them_out():
    code = "from floatfmt import cli; assert cli.main(['show', '0.1', 'bf16']) == 0"
    assert _loaded_after(code) == []


def test_ml_dtypes_inputs_still_work_once_ml_dtypes_is_imported():
    """Lists holding ml_dtypes scalars are taken exactly, as before."""
    import ml_dtypes

    import floatfmt as ff
    from floatfmt.core.mldtypes_link import scalar_types

    assert ml_dtypes.bfloat16 in scalar_types()
    x = [ml_dtypes.bfloat16(1.0078125), 0.5, 3]
    assert ff.cast(x, "fp8_e4m3").tolist() == [1.0, 0.5, 3.0]
    assert ff.cast(np.array(x[:1], ml_dtypes.bfloat16), "bf16").tolist() == [1.0078125]
