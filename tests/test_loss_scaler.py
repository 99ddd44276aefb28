"""LossScaler: GradScaler's state machine, step by step against a hand-written trace
and against torch.amp.GradScaler on CPU (when torch is installed)."""

import numpy as np
import pytest

import floatfmt as ff

try:  # optional oracle
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

# (found_inf, scale after update, growth tracker after update), worked out by hand for
# init_scale=8, growth_factor=2, backoff_factor=0.5, growth_interval=3
TRACE = [
    (False, 8.0, 1),
    (False, 8.0, 2),
    (False, 16.0, 0),  # third clean step in a row: grow
    (True, 8.0, 0),  # overflow: halve, reset
    (False, 8.0, 1),
    (False, 8.0, 2),
    (True, 4.0, 0),  # overflow just before growing: the counter starts again
    (True, 2.0, 0),
    (False, 2.0, 1),
    (False, 2.0, 2),
    (False, 4.0, 0),
    (False, 4.0, 1),
]


def grads_for(found_inf):
    g = np.array([1.0, -2.0, 0.5])
    if found_inf:
        g[1] = np.inf
    return [g, np.array([[3.0, np.nan if found_inf else 4.0]])]


def test_hand_written_trace():
    ls = ff.LossScaler(init_scale=8.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
    for step, (inf, scale_after, tracker) in enumerate(TRACE):
        s = ls.get_scale()
        assert ls.scale(0.25) == 0.25 * s
        unscaled, found = ls.unscale(grads_for(inf))
        assert found is inf and ls.skip is inf
        if not inf:
            assert unscaled[0].tolist() == [1.0 / s, -2.0 / s, 0.5 / s]
        ls.update()
        assert (ls.get_scale(), ls.growth_tracker) == (scale_after, tracker), step
    assert [h["found_inf"] for h in ls.history] == [t[0] for t in TRACE]
    assert ls.state_dict()["_growth_tracker"] == TRACE[-1][2]


def test_static_mode_reports_but_keeps_the_scale():
    ls = ff.LossScaler(init_scale=1024.0, dynamic=False, growth_interval=1)
    for inf in (False, True, False, False):
        _, found = ls.unscale(grads_for(inf))
        assert found is inf
        ls.update()
        assert ls.get_scale() == 1024.0
    assert "static" in repr(ls)


def test_growth_stops_at_fp32_max_and_scale_is_fp32():
    ls = ff.LossScaler(init_scale=2.0 ** 127, growth_interval=1)
    ls.unscale([np.ones(2)])
    ls.update()
    assert ls.get_scale() == 2.0 ** 127  # 2**128 is Inf in fp32: not applied
    assert ls.growth_tracker == 0
    odd = ff.LossScaler(init_scale=3.0, backoff_factor=0.1)
    odd.update(found_inf=True)
    assert odd.get_scale() == float(np.float32(0.3))  # fp32 value, rounded once
    assert ff.LossScaler(init_scale=0.1).get_scale() == float(np.float32(0.1))


def test_unscale_detects_overflow_from_unscaling():
    ls = ff.LossScaler(init_scale=2.0 ** -4)  # a scale below 1 can overflow on unscale
    _, found = ls.unscale(np.array([1e308]))
    assert found


def test_update_needs_found_inf_and_validates():
    ls = ff.LossScaler()
    with pytest.raises(RuntimeError, match="unscale"):
        ls.update()
    ls.update(found_inf=False)
    assert ls.growth_tracker == 1
    for bad in (dict(init_scale=0), dict(growth_factor=1.0), dict(backoff_factor=1.5),
                dict(growth_interval=0)):
        with pytest.raises(ValueError):
            ff.LossScaler(**bad)


def test_defaults_match_torch_gradscaler():
    ls = ff.LossScaler()
    assert (ls.get_scale(), ls.growth_factor, ls.backoff_factor, ls.growth_interval) == \
        (65536.0, 2.0, 0.5, 2000)


@pytest.mark.skipif(torch is None, reason="torch is not installed (optional oracle)")
@pytest.mark.parametrize("interval", [1, 3])
def test_matches_torch_gradscaler_on_cpu(interval):
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.SGD([p], lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=64.0, growth_interval=interval)
    ours = ff.LossScaler(init_scale=64.0, growth_interval=interval)
    w = np.zeros(3, np.float32)
    rng = np.random.default_rng(0)
    pattern = [False, False, True, False, False, False, True, True, False, False, False, False]
    for inf in pattern:
        g = rng.standard_normal(3).astype(np.float32) * scaler.get_scale()
        if inf:
            g[rng.integers(3)] = np.inf
        opt.zero_grad()
        scaler.scale(torch.tensor(1.0))  # initialises the scaler's state, as a loss would
        p.grad = torch.from_numpy(g.copy())
        scaler.unscale_(opt)
        tgrad = p.grad.detach().numpy().copy()
        scaler.step(opt)
        scaler.update()
        (ug,), found = ours.unscale([g])
        if not found:
            w = w - ug.astype(np.float32)  # SGD, lr 1, skipped on overflow
            assert np.array_equal(ug.astype(np.float32), tgrad)
        ours.update()
        assert found == inf
        assert ours.get_scale() == scaler.get_scale()
        assert ours.growth_tracker == int(scaler._growth_tracker.item())
        assert np.array_equal(w, p.detach().numpy())
