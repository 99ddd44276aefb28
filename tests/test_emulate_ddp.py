"""An emulated model under torch.distributed DDP: two CPU processes (gloo) started by
torch.multiprocessing.spawn train a bf16-emulated and an fp8_tensorwise-emulated MLP on
different data; after every step both ranks hold identical parameters, and the loss falls."""

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


def test_ddp_ranks_stay_in_sync_and_loss_falls(tmp_path):
    recipes = ["bf16", "fp8_tensorwise"]
    mp.spawn(_worker, args=(2, _free_port(), recipes, str(tmp_path)), nprocs=2, join=True)
    for recipe in recipes:
        r0, r1 = (torch.load(tmp_path / f"{recipe}_rank{i}.pt") for i in range(2))
        assert torch.equal(r0["params"], r1["params"]), recipe  # identical after every step
        for r in (r0, r1):
            first, last = sum(r["losses"][:3]), sum(r["losses"][-3:])
            assert last < 0.7 * first, (recipe, r["losses"])
