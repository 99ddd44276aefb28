"""An emulated model under torch.distributed DDP: two CPU processes (gloo) started by
torch.multiprocessing.spawn train a bf16-emulated and an fp8_tensorwise-emulated MLP on
different data; after every step both ranks hold identical parameters, and the loss falls;
with ``amax_group`` the delayed-scaling amaxes are reduced over the ranks (TE's fp8_group),
and so are the current-scaling amaxes of activations and gradients (TE's
amax_reduction_group), weights excepted."""

from __future__ import annotations

import os
import socket

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

STEPS = 12


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, recipes: list, out_dir: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for recipe in recipes:
            _train(rank, recipe, out_dir)
        _amax(rank, out_dir)
        _current(rank, out_dir)
    finally:
        dist.destroy_process_group()


def _train(rank: int, recipe: str, out_dir: str) -> None:
    import floatfmt.torch as fft
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    fft.emulate(model, recipe)
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    w_true = torch.linspace(-1, 1, 16)
    losses, snaps = [], []
    for _ in range(STEPS):
        x = torch.randn(32, 16, generator=g)
        y = (x @ w_true)[:, None]
        loss = ((ddp(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        snaps.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    torch.save({"losses": losses, "params": torch.stack(snaps)},
               os.path.join(out_dir, f"{recipe}_rank{rank}.pt"))


RECIPES = ["bf16", "fp8_tensorwise"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One spawn of two ranks for every test here (starting them costs most of the time)."""
    out = tmp_path_factory.mktemp("ddp")
    mp.spawn(_worker, args=(2, _free_port(), RECIPES, str(out)), nprocs=2, join=True)
    return out


def test_ddp_ranks_stay_in_sync_and_loss_falls(runs):

    for recipe in RECIPES:
        r0, r1 = (torch.load(runs / f"{recipe}_rank{i}.pt") for i in range(2))
        assert torch.equal(r0["params"], r1["params"]), recipe  # identical after every step
        for r in (r0, r1):
            first, last = sum(r["losses"][:3]), sum(r["losses"][-3:])
            assert last < 0.7 * first, (recipe, r["losses"])


def _amax(rank: int, out_dir: str) -> None:
    """fp8_tensorwise (delayed scaling) under DDP, with and without ``amax_group``: each
    rank saves its first layer's amax histories and its own local amaxes."""
    import floatfmt.torch as fft
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    amax_pg = dist.new_group()  # apart from DDP's gradient all-reduce
    out = {}
    for reduced in (False, True):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        fft.emulate(model, "fp8_tensorwise", amax_group=amax_pg if reduced else None)
        ddp = DDP(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(7 + rank)
        local = []
        for _ in range(3):
            x = torch.randn(16, 8, generator=g) * (1 + 3 * rank)  # rank 1: 4x the range
            local.append(float(x.abs().max()))
            loss = (ddp(x) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        ds = fft.delayed_scaling(model[0])
        out[reduced] = {"input": ds.history("input"), "local": local,
                        "scale": ds.scale("input")}
    torch.save(out, os.path.join(out_dir, f"amax_rank{rank}.pt"))


def test_amax_group_gives_every_rank_the_maximum_amax_and_the_same_scales(runs):
    """TE's amax reduction over a group: with ``amax_group`` both ranks' input histories
    hold max(local amax of rank 0, of rank 1) at every step, and their scales agree;
    without it each rank keeps its own amax (the ranks' data differ 4x in range)."""
    r0, r1 = (torch.load(runs / f"amax_rank{i}.pt") for i in range(2))
    for r in (r0, r1):  # no reduction: the rank's own amaxes
        assert r[False]["input"] == r[False]["local"]
    assert r0[False]["scale"] != r1[False]["scale"]
    both = [max(a, b) for a, b in zip(r0[True]["local"], r1[True]["local"])]
    assert r0[True]["input"] == r1[True]["input"] == both
    assert r0[True]["scale"] == r1[True]["scale"]


def test_amax_reduction_is_checked_and_applied_in_name_order():
    import floatfmt as ff
    import floatfmt.torch as fft
    seen = []
    ds = ff.DelayedScaling(amax_reduction=lambda a: seen.append(list(a)) or [10.0 * v for v in a])
    ds.quantize("w", [1.0, -2.0])
    ds.quantize("a", [0.5])
    ds.update()
    assert seen == [[0.5, 2.0]] and ds.history("a") == [5.0] and ds.history("w") == [20.0]
    with pytest.raises(TypeError, match="callable"):
        ff.DelayedScaling(amax_reduction=3)
    bad = ff.DelayedScaling(amax_reduction=lambda a: [])
    bad.quantize("w", [1.0])
    with pytest.raises(ValueError, match="returned 0 values"):
        bad.update()
    with pytest.raises(TypeError, match="amax_group"):
        fft.emulate(torch.nn.Linear(2, 2), "fp8_tensorwise", amax_group="world")
    with pytest.raises(RuntimeError, match="not initialised"):
        fft.amax_all_reduce()([1.0])


def _current(rank: int, out_dir: str) -> None:
    """Current scaling (scaling="tensor") under DDP, with and without ``amax_group``: one
    forward and backward; every operand quantisation is recorded (whether its amax was
    reduced, its format, its raw local amax by torch, the scale it got)."""
    import floatfmt.torch as fft
    import floatfmt.torch.emulated_functions as ef
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    recipe = fft.Recipe("fp8_current", fwd_fmt="fp8_e4m3", bwd_fmt="fp8_e5m2", scaling="tensor",
                        model="h100", out_fmt="bf16", wgrad_fmt="bf16")
    pg = dist.new_group()
    seen: list = []
    real = ef.quantize_operand

    def spy(v, fmt, r, axis, *args, **kw):
        op = real(v, fmt, r, axis, *args, **kw)
        seen.append((kw.get("amax_reduction") is not None, fmt, float(v.abs().max()), op.scale))
        return op

    ef.quantize_operand = spy
    out = {}
    try:
        for reduced in (False, True):
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
            fft.emulate(model, recipe, amax_group=pg if reduced else None)
            ddp = DDP(model)
            g = torch.Generator().manual_seed(11 + rank)
            x = torch.randn(16, 8, generator=g) * (1 + 3 * rank)  # rank 1: 4x the range
            seen.clear()
            (ddp(x) ** 2).mean().backward()
            out[reduced] = list(seen)
    finally:
        ef.quantize_operand = real
    torch.save(out, os.path.join(out_dir, f"current_rank{rank}.pt"))


def test_current_scaling_amax_group_gives_every_rank_the_scale_of_the_max_amax(runs):
    """With ``amax_group``: every activation and gradient operand (4 of the 6 quantisations
    of a 2-layer MLP's step) gets, on both ranks, the scale fp32(max(amax_0, amax_1) / max)
    computed here from the two ranks' raw amaxes by exact rational rounding; weights keep
    their own amax.  Without it every scale is the rank's own, and the inputs' differ."""
    from tests.oracles.matrixunit_slow import Fraction, to_fp32
    top = {"fp8_e4m3": 448, "fp8_e5m2": 57344}

    def scale(amax, fmt):
        return to_fp32(Fraction(amax) / top[fmt], "rne")

    r0, r1 = (torch.load(runs / f"current_rank{i}.pt") for i in range(2))
    assert len(r0[True]) == len(r1[True]) == 6
    reduced = 0
    for (red, fmt, a0, s0), (red1, fmt1, a1, s1) in zip(r0[True], r1[True]):
        assert (red, fmt) == (red1, fmt1)
        if red:
            reduced += 1
            assert s0 == s1 == scale(max(a0, a1), fmt), (fmt, a0, a1, s0, s1)
        else:  # a weight: its own amax (equal on both ranks: DDP broadcast rank 0's)
            assert s0 == scale(a0, fmt) and s1 == scale(a1, fmt)
    assert reduced == 4
    for r in (r0, r1):  # no group: each rank its own amax
        assert all(not red and s == scale(a, fmt) for red, fmt, a, s in r[False])
    assert r0[False][0][3] != r1[False][0][3]  # the first layer's inputs: 4x the range
