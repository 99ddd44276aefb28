"""Activation checkpointing of an emulated model: ``torch.utils.checkpoint`` recomputes the
forward inside backward; the recomputation is emulated too, so outputs and gradients equal
those without checkpointing bit for bit (reentrant and non-reentrant), and differ from the
unemulated model's (the check could fail)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import floatfmt.torch as fft  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x, ck=None):
        def f(x):
            return torch.relu(self.a(x))
        h = f(x) if ck is None else checkpoint(f, x, use_reentrant=ck)
        return self.b(h)


def _step(model, x, ck):
    model.zero_grad()
    xx = x.clone().requires_grad_(ck is True)  # the reentrant variant needs an input with grad
    y = model(xx, ck)
    y.square().sum().backward()
    return y.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("recipe", ["bf16", "fp8_tensorwise", "mxfp4"])
def test_checkpointed_emulated_model_equals_the_plain_emulated_one(recipe):
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 16)
    plain_y, plain_g = _step(model, x, None)
    fft.emulate(model, recipe)
    try:
        want_y, want_g = _step(model, x, None)
        if recipe == "fp8_tensorwise":  # delayed scaling: the same scale history for each run
            fft.unemulate(model)
            fft.emulate(model, recipe)
        for ck in (False, True):
            y, g = _step(model, x, ck)
            if recipe == "fp8_tensorwise":
                fft.unemulate(model)
                fft.emulate(model, recipe)
            assert torch.equal(y, want_y), ck
            assert all(torch.equal(a, b) for a, b in zip(g, want_g)), ck
        assert not torch.equal(want_y, plain_y)
        assert not all(torch.equal(a, b) for a, b in zip(want_g, plain_g))
        rep = fft.emulation_report(model)
        assert rep.gemm_flops()[1] == 0  # nothing left unemulated, recomputation included
    finally:
        fft.unemulate(model)
