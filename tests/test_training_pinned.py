"""Short training runs pinned bit for bit: restructuring ``train`` (a ``TrainConfig``, a
frozen ``TrainResult`` with named fields, the loop split into steps) must not change a
single bit of any record, gradient or weight.

The digests and final losses below were computed on the OLD code (commit 3153f20,
before ``train`` was restructured), by /tmp/pin_train.py run in a checkout of that
commit whose ``train`` was patched only to hand out its final parameters.  The digest is
sha256 over the float64 bytes of: loss, accuracy, underflow, overflow, skipped,
loss_scale, lost_updates, [final_loss, final_accuracy, frozen], first_grads, then the
six parameter arrays (three weights, three biases).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from floatfmt.training.loop import TrainConfig, TrainResult, train

# (policy, options): (digest prefix, final loss as float.hex()) -- from the OLD code
PINNED = {
    ("fp32", ()): ("6623ccc1406ee6ade1dfd3bad0904bc8", "0x1.0b24dc0000000p-1"),
    ("tf32", ()): ("8a0e69b9343298969e0e0c31a4dd795d", "0x1.0b24620000000p-1"),
    ("bf16", ()): ("fd4481fa17a96e13d60a80ad757093be", "0x1.0b12500000000p-1"),
    ("fp16", ()): ("0e796b4a7d15671a1c97e7d35b0d6587", "0x1.0b24460000000p-1"),
    ("fp16_no_master", ()): ("d7f15c95534a0c48867ad0e0fef103b0", "0x1.0b28980000000p-1"),
    ("fp16_acc16", ()): ("c93b54517024c5e6eb3594966c6ed1e7", "0x1.0b26320000000p-1"),
    ("fp8", ()): ("d75aee8313d237f1cd8edb57f76943f4", "0x1.0abd040000000p-1"),
    ("fp16", (("init_scale", 2.0 ** 40),)): ("cd4fa64f25677cdbbfc47e9043c3ff3d", "0x1.0bf8900000000p-1"),
    ("bf16", (("acc", "bf16"),)): ("d8d324ed64a6a5ed638f8ba833e37902", "0x1.0b515a0000000p-1"),
}


def digest(r: TrainResult) -> str:
    h = hashlib.sha256()
    for a in (r.loss, r.accuracy, r.underflow, r.overflow, r.skipped, r.loss_scale,
              r.lost_updates, np.array([r.final_loss, r.final_accuracy, r.frozen]),
              r.first_grads, *r.params):
        h.update(np.ascontiguousarray(np.asarray(a, np.float64)).tobytes())
    return h.hexdigest()[:32]


@pytest.mark.parametrize("key", list(PINNED), ids=lambda k: k[0] + "".join(f"-{a}" for a, _ in k[1]))
def test_short_runs_are_bit_identical_to_the_old_loop(key):
    name, opts = key
    r = train(name, 12, n_points=64, hidden=16, keep_grads=True, **dict(opts))
    want_digest, want_loss = PINNED[key]
    assert r.final_loss.hex() == want_loss
    assert digest(r) == want_digest


def test_config_object_and_keywords_agree():
    cfg = TrainConfig(n_points=64, hidden=16, keep_grads=True)
    a = train("fp16", 12, cfg)
    b = train("fp16", 12, n_points=64, hidden=16, keep_grads=True)
    assert digest(a) == digest(b) == PINNED[("fp16", ())][0]
    assert a.config == cfg and a.anneal_step == 8 == cfg.anneal_step(12)


def test_result_is_frozen_and_named():
    r = train("fp32", 3, n_points=32, hidden=8)
    with pytest.raises(AttributeError):
        r.final_loss = 0.0  # type: ignore[misc]
    assert len(r.params) == 6 and r.params[0].shape == (2, 8)


def test_unknown_option_is_a_type_error_listing_the_valid_ones():
    with pytest.raises(TypeError, match="hiden.*valid:.*hidden"):
        train("fp32", 3, hiden=8)
    with pytest.raises(TypeError, match="TrainConfig"):
        train("fp32", 3, {"hidden": 8})
