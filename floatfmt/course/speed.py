"""A back-of-the-envelope speed model for checkpoint questions 2 and 8 ("why is
mixed precision fast?", "AMP is on but nothing got faster").

floatfmt emulates values, not time; this model only makes the course's
arithmetic runnable.  What it counts, and where each figure comes from:

* Peak throughput and bandwidth: NVIDIA A100 (SXM4 40 GB) and H100 (SXM5)
  datasheets (dense, no sparsity): A100 19.5 TFLOP/s FP32, 156 TF32, 312
  BF16/FP16, 1555 GB/s, 108 SMs; H100 67 FP32, 495 TF32, 989 BF16/FP16, 1979
  FP8, 3350 GB/s, 132 SMs.
* The tensor-core path needs every GEMM dimension to be a multiple of 16 bytes
  of the element type: 8 for FP16/BF16, 16 for FP8 (NVIDIA, "Matrix
  Multiplication Background User's Guide", section "Tensor Core
  Requirements"; cuBLAS before 11.0 falls back to CUDA cores otherwise, and
  later versions still use tensor cores, with slower kernels; cuBLASLt's FP8
  GEMM refuses dimensions that are not multiples of 16).  The model takes the
  strict reading: an unaligned GEMM runs at the CUDA-core rate, a floor.
* Tile and wave quantisation (same guide, chapter "Dimension Quantization
  Effects"): the output is computed in tiles (128 x 128 here); a partial tile
  costs a full one, and tiles run in waves of one per SM, so a last, partial
  wave costs a full one too.
* Memory capacity is *not* a speed factor: halving the bytes per activation
  allows a larger batch, which is faster only if the smaller batch left the
  GPU underused (too few tiles to fill every SM).

    >>> a, b = gemm_time(4096, 4096, 4096), gemm_time(4095, 4095, 4095)
    >>> a.tensor_cores, b.tensor_cores
    (True, False)
    >>> round(gemm_time(4096, 4096, 4096, "fp32").seconds / a.seconds, 1)
    15.8
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["GPU", "GPUS", "GemmTime", "gemm_time", "speed_sources", "alignment"]


@dataclass(frozen=True)
class GPU:
    """Datasheet figures (dense FLOP/s by input format, bytes/s, SM count)."""

    name: str
    peak: dict
    cuda_core_peak: float
    bandwidth: float
    sms: int


GPUS = {
    "a100": GPU("A100 SXM4 40GB", {"tf32": 156e12, "bf16": 312e12, "fp16": 312e12}, 19.5e12, 1.555e12, 108),
    "h100": GPU("H100 SXM5", {"tf32": 495e12, "bf16": 989e12, "fp16": 989e12, "fp8_e4m3": 1979e12,
                              "fp8_e5m2": 1979e12}, 67e12, 3.35e12, 132),
}
_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
TILE = 128
LAUNCH = 5e-6  # seconds: a rough kernel launch overhead


def alignment(fmt: str) -> int:
    """Elements per 16 bytes: the multiple every GEMM dimension needs for the
    tensor-core path (8 for FP16/BF16, 16 for FP8, 4 for TF32)."""
    if fmt not in _BYTES:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(_BYTES)}")
    return 16 // _BYTES[fmt]


@dataclass
class GemmTime:
    """Result of :func:`gemm_time`."""

    seconds: float
    tensor_cores: bool
    tiles: int
    waves: int
    utilisation: float  # useful work / work paid for (tile and wave quantisation)
    bound: str          # "compute", "memory" or "launch"


def gemm_time(M: int, N: int, K: int, fmt: str = "bf16", gpu: str = "a100") -> GemmTime:
    """Modelled time of an M x N x K GEMM with inputs in ``fmt`` (see the module
    docstring for the rules and their sources).

    Compute time = waves * (time of one tile per SM), with waves =
    ceil(ceil(M/128) * ceil(N/128) / SMs) and the rate of the tensor cores for
    ``fmt`` when every dimension is a multiple of ``alignment(fmt)`` (else the
    CUDA-core FP32 rate); memory time = bytes of A, B and C / bandwidth; the
    result is the launch overhead plus the larger of the two.
    """
    if gpu not in GPUS:
        raise ValueError(f"unknown gpu {gpu!r}; valid: {', '.join(GPUS)}")
    g = GPUS[gpu]
    if min(M, N, K) < 1:
        raise ValueError("M, N and K must be positive")
    a = alignment(fmt)
    tc = fmt in g.peak and all(d % a == 0 for d in (M, N, K))
    rate = g.peak[fmt] if tc else g.cuda_core_peak
    tiles = math.ceil(M / TILE) * math.ceil(N / TILE)
    waves = math.ceil(tiles / g.sms)
    compute = waves * (2 * TILE * TILE * K) / (rate / g.sms)
    memory = (M * K + K * N) * _BYTES[fmt] / g.bandwidth + M * N * 4 / g.bandwidth
    util = 2 * M * N * K / (waves * g.sms * 2 * TILE * TILE * K)
    bound = "compute" if compute >= memory else "memory"
    if LAUNCH > max(compute, memory):
        bound = "launch"
    return GemmTime(LAUNCH + max(compute, memory), tc, tiles, waves, util, bound)


def speed_sources(gpu: str = "a100", n_elementwise: float = 100e6) -> list[tuple[str, float | None]]:
    """Checkpoint 2's sources of speed, as (name, factor vs FP32); the memory
    capacity entry has factor None: it speeds nothing up by itself."""
    g = GPUS[gpu]
    tc = g.peak["bf16"] / g.cuda_core_peak
    bw = (2 * n_elementwise * 4) / (2 * n_elementwise * 2)
    return [("tensor-core throughput (large, aligned matrix multiplies)", tc),
            ("memory bandwidth: half the bytes moved (elementwise ops, memory-bound GEMMs)", bw),
            ("memory capacity: half the bytes per activation (only indirect: a larger batch helps "
             "only if the GPU was underused)", None)]
