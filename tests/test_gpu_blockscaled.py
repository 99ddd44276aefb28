"""The Blackwell block-scaled capture section (floatfmt/gpu/sections/blockscaled.py) on
the CPU: the cuBLAS scale layout, the probe operands, a dry-run record, and the replay
of a recorded check (with a stand-in for the GPU's output)."""

from __future__ import annotations

import types

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.gpu import probes as P
from floatfmt.gpu.compare import compare_fixture
from floatfmt.gpu.fixture import Fixture, FixtureWriter
from floatfmt.gpu.sections import blockscaled as S
from floatfmt.gpu.sections import section_names
from floatfmt.arith.matrixunit.tensorcore import tensorcore_models


@pytest.mark.parametrize("rows,cols", [(128, 4), (3, 2), (130, 7), (256, 8)])
def test_blocked_layout_places_every_entry(rows, cols):
    codes = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols) + 1
    t = S.to_blocked_layout(codes)
    R, C = -(-rows // 128) * 128, -(-cols // 4) * 4
    assert t.size == R * C
    for r in range(rows):  # the layout written out entry by entry
        for c in range(cols):
            tile = (r // 128) * (C // 4) + c // 4
            rr, cc = r % 128, c % 4
            assert t[tile * 512 + (rr % 32) * 16 + (rr // 32) * 4 + cc] == codes[r, c]
    assert np.count_nonzero(t) == rows * cols  # padding is zero


@pytest.mark.parametrize("block_fmt", list(S.BLOCK_TORCH))
def test_probe_operands_decode_to_the_probe(block_fmt):
    for p in P.blockscaled_probes(block_fmt):
        ops = S.probe_operands(p, block_fmt)
        m = tensorcore_models()[ops["model"]]
        a = ff.decode(ops["a"], m.fmt)
        b = ff.decode(ops["b"], m.fmt)
        sa = ff.decode(ops["a_scale"], m.scale_fmt)
        assert np.array_equal(a[0], p.a) and np.array_equal(b[:, 0], p.b)
        assert not a[1:].any() and not b[:, 1:].any()
        same = (sa[0] == p.meta["a_scale"]) | (np.isnan(sa[0]) & np.isnan(p.meta["a_scale"]))
        assert same.all() and (sa[1:] == 1).all()


def _ctx(tmp_path, dry=True):
    logs: list = []
    return types.SimpleNamespace(dry=dry, device="cpu", writer=FixtureWriter(tmp_path, {"evidence": "cpu"}),
                                 log=logs.append, logs=logs, dev=None)


def test_section_is_registered_and_skips_without_a_b200(tmp_path):
    assert "blockscaled" in section_names()
    ctx = _ctx(tmp_path / "run")
    S.run(ctx)  # a dry run: one skipped check that says why
    (chk,) = ctx.writer.summary["checks"]
    assert chk["status"] == "skipped" and "Blackwell" in chk["error"]
    ctx = _ctx(tmp_path)
    S.record_checks(ctx, "no B200 here")
    checks = ctx.writer.summary["checks"]
    assert {c["name"] for c in checks} >= {"blockscaled.mxfp8_e4m3.k32", "blockscaled.mxfp8_e4m3.k64",
                                         "blockscaled.nvfp4.k64", "blockscaled.nvfp4.k128"}
    assert all(c["status"] == "skipped" and c["error"] == "no B200 here" for c in checks)
    ctx.writer.save()
    res = compare_fixture(Fixture(tmp_path))
    assert all(r.status == "not compared" for r in res)


def test_replay_of_a_recorded_check(tmp_path):
    """A record with an 'out' array (here the prediction, then one flipped bit) replays
    through floatfmt.gpu.compare: all match, then exactly one mismatch."""
    ctx = _ctx(tmp_path)
    S.record_checks(ctx, "stand-in")
    w = ctx.writer
    for chk in w.summary["checks"]:
        chk.pop("status")
        chk.pop("error")
        pred = w.get(chk["arrays"]["pred"])
        if chk["name"] == "blockscaled.nvfp4.k64":
            pred = pred.copy()
            pred[0] ^= 1
        chk["arrays"]["out"] = w.put("blockscaled.npz", chk["name"] + ".out", pred)
    w.save()
    res = {r.name: r for r in compare_fixture(Fixture(tmp_path))}
    for name, r in res.items():
        assert r.status != "error", (name, r.note)
        assert r.n_mismatch == (1 if name == "blockscaled.nvfp4.k64" else 0), name
    # the recorded expectations are the reference's values (not the prediction)
    chk = next(c for c in w.summary["checks"] if c["name"] == "blockscaled.mxfp8_e4m3.k64")
    exp = P.f32_values(w.get(chk["arrays"]["expect"]))
    i = chk["params"]["probes"].index("cprec_d25")
    assert exp[i] == 1.0 - 2.0 ** -24
