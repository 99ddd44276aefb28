"""The torch side of the GPU capture: format codes into tensors, casts and matrix
products on a torch device, and the results back as codes.

Everything the capture sends to a device is a numpy array of format codes (the bit
patterns); everything it gets back is codes again, so the comparison with floatfmt is
a comparison of bits. torch is imported inside functions only: this module imports
where torch is missing.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..core.formats import get_format
from . import probes as P

__all__ = ["TORCH_DTYPES", "TorchDevice", "to_codes", "worker_init"]

# floatfmt format name -> torch dtype name (tf32 operands live in float32 tensors).
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
                "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "tf32": "float32"}


def to_codes(t: Any, bits: int) -> np.ndarray:
    """Codes (unsigned numpy integers) of a torch tensor whose dtype is ``bits`` wide."""
    import torch
    iview = {8: torch.uint8, 16: torch.int16, 32: torch.int32}[bits]
    udt = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
    return t.view(iview).cpu().numpy().view(udt)


def worker_init() -> None:
    """Initializer of the capture's worker processes: one thread each (the pool is the
    parallelism)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass


class TorchDevice:
    """Casts and GEMMs on a torch device (``"cuda"`` or ``"cpu"``), codes in, codes out."""

    def __init__(self, torch: Any, device: str):
        self.torch = torch
        self.device = device

    def dtype(self, name: str) -> Any:
        """The torch dtype that stores floatfmt format ``name``."""
        return getattr(self.torch, TORCH_DTYPES[name])

    def to_tensor(self, codes: np.ndarray, fmt_name: str, device: str | None = None) -> Any:
        """A tensor on ``device`` holding the values whose codes in ``fmt_name`` are given."""
        torch = self.torch
        store = P.storage_format(fmt_name)
        codes = np.ascontiguousarray(codes)
        iview = {8: (np.uint8, torch.uint8), 16: (np.int16, torch.int16), 32: (np.int32, torch.int32)}[store.bits]
        t = torch.from_numpy(codes.view(iview[0]).copy())
        return t.view(self.dtype(store.name)).to(device or self.device)

    def cast(self, codes: np.ndarray, src: str, dst: str, device: str | None = None) -> np.ndarray:
        """Codes of ``dst`` that torch's cast gives for the ``src`` codes, on ``device``."""
        x = self.to_tensor(codes, src, device)
        return to_codes(x.to(self.dtype(dst)), get_format(dst).bits)

    def gemm(self, a_codes: np.ndarray, b_codes: np.ndarray, in_fmt: str, out_fmt: str, fast: bool | None,
             tf32: bool = True, device: str | None = None) -> tuple[np.ndarray, str]:
        """Run a @ b on the device; returns (output codes, how it was run as text).

        fp32/tf32 inputs go through ``torch.mm`` with TF32 allowed only for ``tf32``;
        FP8 through ``torch._scaled_mm`` with unit scales and ``use_fast_accum=fast``;
        16-bit inputs through ``torch.mm`` (with ``out_dtype`` for a wider output)."""
        torch = self.torch
        device = device or self.device
        A = self.to_tensor(a_codes, in_fmt, device)
        B = self.to_tensor(b_codes, in_fmt, device)
        odt = self.dtype(out_fmt)
        if in_fmt in ("tf32", "fp32"):
            on = bool(tf32 and in_fmt == "tf32")
            torch.backends.cuda.matmul.allow_tf32 = on
            torch.set_float32_matmul_precision("high" if on else "highest")
            out, how = torch.mm(A, B), f"torch.mm fp32, allow_tf32={torch.backends.cuda.matmul.allow_tf32}"
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.set_float32_matmul_precision("highest")
        elif in_fmt.startswith("fp8"):
            one = torch.ones((), dtype=torch.float32, device=device)
            Bc = B.t().contiguous().t()  # column-major, as _scaled_mm requires
            out = torch._scaled_mm(A, Bc, scale_a=one, scale_b=one, out_dtype=odt, use_fast_accum=bool(fast))
            how = f"torch._scaled_mm unit scales, use_fast_accum={bool(fast)}"
        elif out_fmt == in_fmt:
            out, how = torch.mm(A, B), "torch.mm"
        else:
            try:
                out, how = torch.mm(A, B, out_dtype=odt), f"torch.mm(out_dtype={odt})"
            except (RuntimeError, TypeError, NotImplementedError):
                if device != "cpu":
                    raise
                out, how = (A.float() @ B.float()), "CPU fallback: float32 matmul of the operands"
        return to_codes(out.to(odt) if out.dtype != odt else out, get_format(out_fmt).bits), how
