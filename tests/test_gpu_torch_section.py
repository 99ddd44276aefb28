"""The capture's ``torch`` section (floatfmt.gpu.sections.torch_path) in a dry run on the CPU:
the device calls run the namespace code (what CUDA runs) and must match the CPU
tensors' numpy kernels; functions without device code are recorded, not failed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the dry run needs torch)")

from floatfmt.gpu.sections.torch_path import CAST_FORMATS, torch_section  # noqa: E402


def test_dry_run_section_on_cpu():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    lines: list[str] = []
    try:
        r = torch_section(torch, "cpu", True, lines.append)
    finally:
        torch.set_num_threads(n)
    checks = {c["name"]: c for c in r["checks"]}
    must_match = [f"cast.{f}" for f in CAST_FORMATS] + ["cast.narrow_dtypes", "encode_decode",
                                                        "cast.stochastic_seeded", "fake_quant"]
    for name in must_match:
        c = checks[name]
        assert c["status"] == "ok" and c["mismatches"] == 0 and c["cases"] > 0, c
    # no check errors; the rest either ran and matched or say they have no device code
    for c in r["checks"]:
        assert c["status"] in ("ok", "not_implemented"), c
        if c["status"] == "not_implemented":
            assert "no cpu implementation" in c["note"] or "not implemented on the device" in c["note"], c
    products = [n for n in checks if n.startswith(("matmul.", "mma."))]
    assert len(products) >= 30 and "matmul.h100/int8" in products and "matmul.mi300/bf16" in products
    for name in products:  # every tensor-core preset has device code
        assert checks[name]["status"] == "ok" and checks[name]["mismatches"] == 0, checks[name]
    t = r["timings"]
    for name in ("cast", "casts_f32", "gemm_vs_sgemm", "gemm_4096", "training_step"):
        assert "error" not in t[name], t[name]
        assert any(line.startswith(f"  torch timing {name}: ") for line in lines), name
    assert t["cast"]["elements"] > 0 and t["cast"]["device_ns"] > 0
    for fmt in ("bf16", "fp16", "fp8_e4m3"):  # (standard normal: torch's RNE agrees)
        rec = t["casts_f32"][fmt]
        assert rec["ff_ns"] > 0 and rec["torch_ns"] > 0 and rec["differ_from_torch"] == 0, rec
        assert all(rec[f"{m}_over_rne"] > 0 for m in ("toward_zero", "up", "down")), rec
    assert t["gemm_vs_sgemm"]["size"] == 64 and t["gemm_vs_sgemm"]["ff_over_sgemm"] > 1
    step = t["training_step"]
    assert step["exact_s"] > step["plain_s"] > 0 and step["fast_s"] > 0, step
