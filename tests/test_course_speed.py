"""The speed model behind checkpoints 2 and 8: expectations worked out by hand
from the datasheet numbers and the tile / wave rules (not read back from the model)."""

import math

import pytest

from floatfmt.course.speed import alignment, gemm_time, speed_sources

A100_BF16, A100_FP32, A100_SMS = 312e12, 19.5e12, 108


def test_alignment_is_16_bytes():
    assert (alignment("bf16"), alignment("fp16"), alignment("fp8_e4m3"), alignment("tf32")) == (8, 8, 16, 4)
    with pytest.raises(ValueError, match="valid"):
        alignment("bf17")


def test_4095_does_not_get_4096s_speedup():
    aligned, odd = gemm_time(4096, 4096, 4096), gemm_time(4095, 4095, 4095)
    assert aligned.tensor_cores and not odd.tensor_cores
    # both: 32 x 32 = 1024 tiles of 128 x 128, ceil(1024 / 108) = 10 waves; only the rate differs
    assert aligned.tiles == odd.tiles == 1024 and aligned.waves == odd.waves == 10
    fp32 = gemm_time(4096, 4096, 4096, "fp32")
    assert fp32.seconds / aligned.seconds > 10             # the tensor-core speedup...
    assert fp32.seconds / odd.seconds < 1.01               # ...is gone at 4095
    expect = 10 * 2 * 128 * 128 * 4096 / (A100_BF16 / A100_SMS)
    assert math.isclose(aligned.seconds, 5e-6 + expect, rel_tol=1e-12)


def test_fp8_needs_multiples_of_16():
    assert gemm_time(4104, 4104, 4104, "bf16", "h100").tensor_cores      # 4104 = 8 * 513
    assert not gemm_time(4104, 4104, 4104, "fp8_e4m3", "h100").tensor_cores
    assert gemm_time(4112, 4112, 4112, "fp8_e4m3", "h100").tensor_cores  # 16 * 257


def test_tile_and_wave_quantisation():
    # 4097 needs a 33rd row and column of tiles: 1089 tiles, 11 waves on 108 SMs, not 10
    t = gemm_time(4104, 4104, 4096)
    assert t.tiles == 33 * 33 and t.waves == math.ceil(1089 / A100_SMS) == 11


def test_memory_capacity_is_not_a_speedup():
    names = dict(speed_sources())
    cap = [k for k in names if k.startswith("memory capacity")]
    assert len(cap) == 1 and names[cap[0]] is None
    assert names["tensor-core throughput (large, aligned matrix multiplies)"] == A100_BF16 / A100_FP32
    # a bigger batch is free only while SMs are idle: 32 tiles -> 64 tiles is still one wave of 108...
    small, double = gemm_time(512, 1024, 4096), gemm_time(1024, 1024, 4096)
    assert small.waves == double.waves == 1 and double.seconds == small.seconds
    # ...but once the waves are full, doubling the batch doubles the time (no speedup per sample)
    full, full2 = gemm_time(8192, 8192, 4096), gemm_time(16384, 8192, 4096)
    assert math.isclose(full2.seconds / full.seconds, math.ceil(8192 / A100_SMS) / math.ceil(4096 / A100_SMS),
                        rel_tol=1e-2)  # launch overhead aside
    assert full2.seconds / full.seconds > 1.9
