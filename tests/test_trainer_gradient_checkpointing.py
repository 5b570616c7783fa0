"""actor.gradient_checkpointing on one process: the same loss and gradients, blocks recomputed.

The workers' side (FSDP2 units with checkpointing against one process without it) is in
tests/test_trainer_distributed_features.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.distributed.fsdp import decoder_layers
from evalkit.trainer.model_parts import enable_gradient_checkpointing, vision_tower
from evalkit.trainer.step import StepSettings, accumulate_loss
from tests.test_trainer_distributed import _inputs  # 2 video rows, 2 text rows

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SETTINGS = StepSettings(micro_batch_size=2, loss_agg_mode="token-mean")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evalkit.tiny_checkpoint import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", "qwen2_5_vl", seed=0)


def _step(actor: ActorPolicy) -> tuple[float, dict[str, torch.Tensor], list[int]]:
    """Loss, gradients and forward counts of (decoder layer 0, vision block 0) of one step."""
    counts = [0, 0]
    blocks = [decoder_layers(actor.model)[0], vision_tower(actor.model).blocks[0]]
    hooks = []
    for i, block in enumerate(blocks):  # pre-hooks: the recompute stops before post-hooks

        def count(*_: Any, i: int = i) -> None:
            counts[i] += 1

        hooks.append(block.register_forward_pre_hook(count))
    inputs, rows = _inputs(actor)
    actor.train()
    actor.set_rows(rows)
    result = accumulate_loss(actor, inputs, SETTINGS)
    for h in hooks:
        h.remove()
    grads = {n: p.grad.clone() for n, p in actor.named_parameters() if p.grad is not None}
    return result.loss, grads, counts


def test_checkpointed_step_equals_the_plain_step_and_recomputes(tiny: Path) -> None:
    plain_loss, plain_grads, plain_counts = _step(ActorPolicy.from_pretrained(tiny))
    actor = ActorPolicy.from_pretrained(tiny)
    enable_gradient_checkpointing(actor.model)
    loss, grads, counts = _step(actor)
    assert abs(loss - plain_loss) < 1e-5
    assert sorted(grads) == sorted(plain_grads)
    assert max(float((grads[k] - plain_grads[k]).abs().max()) for k in grads) < 1e-5
    # every block ran once more, in the backward
    assert [2 * c for c in plain_counts] == counts


def test_a_model_without_checkpointing_support_is_refused() -> None:
    with pytest.raises(ValueError, match="does not support gradient checkpointing"):
        enable_gradient_checkpointing(torch.nn.Linear(2, 2))
