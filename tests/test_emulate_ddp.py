"""An emulated model under torch.distributed DDP: two CPU processes (gloo) started by
torch.multiprocessing.spawn train a bf16-emulated and an fp8_tensorwise-emulated MLP on
different data; after every step both ranks hold identical parameters, and the loss falls;
with ``amax_group`` the delayed-scaling amaxes are reduced over the ranks (TE's fp8_group)."""

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
