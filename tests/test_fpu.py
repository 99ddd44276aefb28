"""floatfmt on a thread that flushes subnormals (``floatfmt.backend.fpu``).

``torch.set_flush_denormal(True)`` sets x86's DAZ / FTZ bits on the calling thread; numpy
and Python floats then read subnormal inputs as zero.  Every public call here runs on
subnormal inputs with the bits set and must give the bits it gives on an IEEE thread
(computed first), and leave the bits set as it found them.  Where floatfmt cannot clear
them, it raises FloatingPointError instead of a wrong number.
"""

from __future__ import annotations

import importlib
import math
import sys

import numpy as np
import pytest

import floatfmt as ff

torch = pytest.importorskip("torch")
fpu = importlib.import_module("floatfmt.backend.fpu")

TINY64 = np.array([5e-324, -5e-324, 1e-310, 2.2250738585072009e-308, 3e-320, 0.0, 1.5])
TINY32 = np.array([1e-45, -1e-45, 1e-40, 1.17549421e-38, 0.0, 1.5], np.float32)


def same(a, b) -> bool:
    """The same dtype, shape and bytes (no float arithmetic or conversion: on a flushing
    thread those would read subnormals as zero on both sides)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _calls():
    rng = np.random.default_rng(1)
    big32 = rng.standard_normal(6 * (1 << 17)).astype(np.float32)
    big32[::3] = rng.integers(1, 1 << 23, big32[::3].size, dtype=np.uint32).view(np.float32)
    m = rng.standard_normal((24, 16)) * 1e-310  # subnormal: products with 1e300 are normal
    return _calls_on(big32, m, np.full((16, 5), 1e300), np.full(TINY64.size, 1e300))


def _calls_on(big32, m, mt, wide):
    """The calls, on operands made beforehand (on a flushing thread numpy's own
    ``TINY64 * 1e300`` would be zero)."""
    return {
        "cast fp16 up": lambda: ff.cast(TINY64, "fp16", "up"),
        "cast fp64 nearest": lambda: ff.cast(TINY64, "fp64"),
        "cast fp32 down": lambda: ff.cast(TINY64, "fp32", "down"),
        "cast bf16 odd": lambda: ff.cast(TINY64, "bf16", "odd"),
        "cast scalar": lambda: ff.cast(5e-324, "fp16", "up"),
        "cast float32 fp16 up": lambda: ff.cast(TINY32, "fp16", "up"),
        "cast float32 bf16": lambda: ff.cast(TINY32, "bf16"),
        "cast float32 many subnormals, pooled": lambda: ff.cast(big32, "fp8_e4m3", "up"),
        "cast tensor": lambda: ff.cast(torch.from_numpy(TINY64.copy()), "fp16", "up").numpy(),
        "cast tensor float32": lambda: ff.cast(torch.from_numpy(TINY32.copy()), "fp16", "up").numpy(),
        "encode": lambda: ff.encode(TINY64, "fp64").astype(np.float64),
        "decode": lambda: ff.decode(np.array([1, 2, 0x8001], np.uint64), "fp64"),
        "next_up": lambda: ff.next_up(np.zeros(2), "fp64"),
        "ulp": lambda: ff.ulp(TINY64, "fp64"),
        "add": lambda: ff.add(TINY64, TINY64, "fp64"),
        "mul": lambda: ff.mul(TINY64, np.full(TINY64.size, 0.75), "fp64"),
        "fma": lambda: ff.fma(TINY64, np.full(TINY64.size, 3.0), TINY64, "fp64"),
        "div": lambda: ff.div(TINY64, np.full(TINY64.size, 3.0), "fp64", "up"),
        "sqrt": lambda: ff.sqrt(np.abs(TINY64), "fp64"),
        "sum": lambda: ff.sum(TINY64[:-1], "fp64"),
        "dot": lambda: ff.dot(TINY64[:-1], wide[:-1], "fp64"),
        "matmul": lambda: ff.matmul(m, mt, "fp64"),
        "array": lambda: np.asarray((ff.array(TINY64, "fp64") + ff.array(TINY64, "fp64")).values),
    }


CALLS_NOW = _calls()  # (operands made at import, on an IEEE thread)
CALLS = sorted(CALLS_NOW)


@pytest.fixture(scope="module")
def ieee_results():
    assert not fpu.flushing()
    with ff.limit_threads(2):
        return {k: f() for k, f in CALLS_NOW.items()}


@pytest.fixture
def flushed():
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-denormal mode")
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_call_gives_the_ieee_bits_on_a_flushing_thread(ieee_results, flushed, threads):
    """Subnormal inputs under DAZ / FTZ: the IEEE thread's bits.  Three threads make a
    new pool, whose workers start flushing (they inherit the caller's bits)."""
    assert fpu.flushing()
    calls = CALLS_NOW
    with ff.limit_threads(threads):
        got = {k: calls[k]() for k in CALLS}
    assert fpu.flushing()  # the caller's state is back
    bad = [k for k in CALLS if not same(got[k], ieee_results[k])]
    assert not bad, bad
    assert ieee_results["cast scalar"] == 2.0 ** -24
    assert ieee_results["next_up"].view(np.uint64).tolist() == [1, 1]  # (bits: 5e-324)


def test_the_check_is_what_flushing_does():
    """``flushing`` tells the two states apart (numpy's float32 product as the witness)."""
    def witness() -> bool:
        with np.errstate(all="ignore"):
            return bool((np.array([2.0 ** -149], np.float32) * np.float32(1.0))[0] == 0)
    assert fpu.flushing() is witness() is False
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-denormal mode")
    try:
        assert fpu.flushing() is witness() is True
        with fpu.ieee():
            assert fpu.flushing() is witness() is False
        assert fpu.flushing()
    finally:
        torch.set_flush_denormal(False)


def test_the_state_is_back_after_an_error(flushed):
    with pytest.raises(ValueError):
        ff.cast(TINY64, "fp16", "no_such_mode")
    assert fpu.flushing()


def test_emulated_layers_forward_and_backward(flushed):
    """An emulated Linear (forward and backward, under autograd) on inputs near float32's
    smallest normal: its output and weight gradient are subnormal on an IEEE thread, and
    the flushing thread gives the same bits.  (The inputs are made on an IEEE thread:
    torch's own ``randn * 1e-38`` flushes them here.)"""
    import copy

    import floatfmt.torch as fft

    torch.set_flush_denormal(False)
    torch.manual_seed(0)
    lin0 = torch.nn.Linear(16, 8, bias=False)
    x0 = torch.randn(4, 16) * 1e-38
    assert ((x0.abs() < 2.0 ** -126) & (x0 != 0)).any()

    def run():
        lin, x = copy.deepcopy(lin0), x0.clone().requires_grad_()
        with fft.emulating(lin, "bf16"):
            y = lin(x)
            y.sum().backward()
        return [y.detach().numpy().copy(), x.grad.numpy().copy(), lin.weight.grad.numpy().copy()]

    want = run()
    for w in (want[0], want[2]):
        assert ((np.abs(w) < 2.0 ** -126) & (w != 0)).sum() > w.size // 2
    torch.set_flush_denormal(True)
    got = run()
    assert all(same(g, w) for g, w in zip(got, want))  # (bits: no float arithmetic)


def test_no_way_to_clear_it_is_an_error(flushed, monkeypatch):
    """Where neither the C library nor torch can clear the bits: FloatingPointError
    naming the cause and the fix, not a wrong number."""
    monkeypatch.setattr(fpu, "_env", lambda: None)
    monkeypatch.delitem(sys.modules, "torch")
    with pytest.raises(FloatingPointError, match="flushes subnormal numbers.*set_flush_denormal"):
        ff.cast(TINY64, "fp16", "up")
    monkeypatch.undo()
    assert fpu.flushing()


def test_torch_switch_is_the_fallback(flushed, monkeypatch):
    """Without the C library's fenv: ``torch.set_flush_denormal(False)`` for the call, and
    on again after."""
    monkeypatch.setattr(fpu, "_env", lambda: None)
    got = ff.cast(TINY64, "fp16", "up")
    assert same(got, np.array([2.0 ** -24, -0.0, 2.0 ** -24, 2.0 ** -24, 2.0 ** -24, 0.0, 1.5]))
    assert fpu.flushing()


# Public functions that do no float arithmetic of their own (names, registries, settings,
# context managers whose body is the caller's code).
NO_ARITHMETIC = {"formats", "get_format", "register", "p3109", "p3109_formats", "block_formats",
                 "get_block_format", "get_num_threads", "set_num_threads", "limit_threads",
                 "tensorcore_models", "set_matmul_kernel", "get_matmul_kernel", "matmul_kernel",
                 "flags"}


def test_every_public_function_is_an_ieee_entry():
    """Each public function of ``floatfmt`` runs under ``fpu.ieee`` on a flushing thread
    (``ieee_entry``, ``tensor_entry``, or ``cast``'s own check), but those that do no
    arithmetic: a new public function must choose."""
    import inspect

    loose = []
    for name in ff.__all__:
        f = getattr(ff, name)
        if not inspect.isfunction(f) or name in NO_ARITHMETIC:
            continue
        if not (getattr(f, "__wrapped_ieee__", False) or "if flushing():" in inspect.getsource(f)):
            loose.append(name)
    assert not loose, loose
    assert not NO_ARITHMETIC - set(ff.__all__)


def test_smallest_values_do_not_depend_on_the_thread(flushed):
    """Format facts read outside any call hold the right bits (subnormal powers of two
    built from bits; Python's own float arithmetic, ``==`` and ``hex()`` included, reads
    them as zero on this thread, so the bits are looked at)."""
    import struct

    def bits(v: float) -> int:
        return int.from_bytes(struct.pack("<d", v), "little")

    assert bits(ff.get_format("fp64").smallest_subnormal) == 1
    assert bits(ff.get_format("fp32").smallest_subnormal) == (1023 - 149) << 52
    assert bits(ff.get_format("fp64").smallest_normal) == 1 << 52


IEEE_POW2 = {e: math.ldexp(1.0, e) for e in range(-1100, 1024)}  # made on an IEEE thread


def test_pow2_does_not_depend_on_the_thread(flushed):
    """``fpu.pow2`` gives the bits of ``math.ldexp(1.0, e)`` (read before the switch) for
    every exponent from below the smallest subnormal to the largest normal."""
    import struct

    wrong = [e for e, v in IEEE_POW2.items()
             if struct.pack("<d", fpu.pow2(e)) != struct.pack("<d", v)]
    assert not wrong, wrong[:8]
    assert fpu.flushing()
