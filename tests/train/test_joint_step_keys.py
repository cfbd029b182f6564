"""The joint step's in-step negatives (``contrast.in_batch_negatives``): every key of a step is
encoded before any query, so the contrast computes the same losses and gradients whatever
micro-batch budget cuts the step; the queue gets exactly the step's keys; fillers are no
negatives; the symmetric loss's two query passes draw the same dropout."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from infoxlm.data.batching import filler_contrast_batch
from infoxlm.objectives.registry import contrast_objective
from infoxlm.train.config import ContrastConfig, apply_overrides
from infoxlm.train.joint_model import JointModel
from infoxlm.train.joint_step import NO_PHASES, StepContext
from infoxlm.train.loop import Trainer
from infoxlm.train.presets import preset

from test_joint_model import _parts
from test_loop import structured_store

# Mean pooling: at the tiny model's initialisation the <s> states of all sentences nearly
# coincide, and XLCO's gradient is then a difference of almost equal vectors, rounding noise.
IN_STEP = ["contrast.in_batch_negatives=true", "contrast.pooling=mean", "data.xlco_batch_size=32",
           "data.mmlm_batch_size=2", "data.tlm_batch_size=2", "optim.warmup_steps=0"]  # fmt: skip
# The contrast's families with in-step negatives: beside a queue of momentum keys (the demo's),
# keys from the query encoder itself (--no-momentum), and LaBSE's translation ranking.
RECIPES = {
    "momentum-keys": [],
    "no-momentum": ["contrast.use_momentum=false"],
    "translation-ranking": ["contrast.use_momentum=false", "contrast.queue_size=0", "contrast.symmetric=true",
                            "contrast.margin=0.3", "contrast.normalize=true", "contrast.temperature=0.05"],
}  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return structured_store(tmp_path_factory.mktemp("in-step") / "store")


def _trainer(store, run, overrides):
    with contextlib.redirect_stdout(io.StringIO()):
        return Trainer(apply_overrides(preset("test"), overrides), store, run, progress=False)


def _train(trainer, steps: int):
    """Each step's logged losses, the gradients the optimizer got (after clipping) and the queue."""
    named = [(n, p) for n, p in trainer.model.named_parameters() if p.requires_grad]
    grads = []
    trainer.optimizer.register_step_pre_hook(lambda *_: grads.append({n: p.grad.clone() for n, p in named}))
    metrics = []
    for _ in range(steps):
        metrics.append(trainer.train_step())
        trainer.step += 1
    return metrics, grads, trainer.model.contrast.queue.clone()


@pytest.mark.parametrize("recipe", RECIPES, ids=list(RECIPES))
def test_in_step_negatives_give_the_same_losses_and_gradients_at_any_token_budget(store, tmp_path, recipe):
    results, cuts = {}, {}
    for budget in (16384, 192, 96):
        trainer = _trainer(store, tmp_path / str(budget), [*IN_STEP, *RECIPES[recipe], f"data.max_tokens={budget}"])
        cuts[budget] = len(trainer.pipeline.step(0, 0, 1).xlco)
        results[budget] = _train(trainer, steps=2)
    assert cuts[16384] == 1 and 1 < cuts[192] < cuts[96]  # the same 32 pairs in 1, several, many micro-batches
    (metrics, grads, queue), *others = results.values()
    for other_metrics, other_grads, other_queue in others:
        for a, b in zip(metrics, other_metrics):
            for key in ("loss/xlco", "xlco/accuracy", "loss/mmlm", "loss/tlm", "grad_norm"):
                assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-5), key
        for a, b in zip(grads, other_grads):
            for names in (list(a), ["contrast.query_projection.weight"]):  # all; what XLCO alone reaches
                first, other = (torch.cat([g[n].flatten() for n in names]) for g in (a, b))
                assert (other - first).norm() <= 1e-5 * first.norm(), names[-1]
        torch.testing.assert_close(other_queue, queue, rtol=1e-4, atol=1e-5)


def test_the_queue_gets_exactly_the_steps_keys_in_slot_order(store, tmp_path):
    trainer = _trainer(store, tmp_path / "run", [*IN_STEP, "data.max_tokens=64", "contrast.queue_size=96"])
    trainer.model.contrast.prefill_from(StepContext(trainer.joint_step, NO_PHASES))
    contrast, start = trainer.model.contrast, int(trainer.model.contrast.queue_pointer)
    data = trainer.pipeline.step(0, 0, 1)
    assert len(data.xlco) > 1
    keys = torch.cat([contrast.encode_keys(b.key.input_ids, b.key.attention_mask) for b in data.xlco])  # before the EMA
    slots = torch.cat([b.slots for b in data.xlco])
    trainer.train_step()
    rows = torch.arange(start, start + 32) % 96
    torch.testing.assert_close(contrast.queue[rows], keys[torch.argsort(slots)], rtol=1e-5, atol=1e-6)
    assert int(contrast.queue_pointer) == (start + 32) % 96


def test_fillers_are_no_negatives(store, tmp_path):
    """A rank's fillers (one-row stand-ins, train/joint_step.even_out) run the encoders but
    leave no key in the step: the step's keys are those of its real pairs alone."""
    trainer = _trainer(store, tmp_path / "run", [*IN_STEP, "data.max_tokens=64"])
    real = trainer.pipeline.step(0, 0, 1).xlco
    contrast, context = trainer.model.contrast, StepContext(trainer.joint_step, NO_PHASES)
    contrast.before_micro_steps(real, context)
    alone = contrast.in_step_keys
    led = [filler_contrast_batch(), filler_contrast_batch(), *real]  # as even_out leads them
    contrast.before_micro_steps(led, context)
    with_fillers = contrast.in_step_keys
    assert alone.slots.tolist() == with_fillers.slots.tolist() == list(range(32))
    torch.testing.assert_close(with_fillers.keys, alone.keys)


def test_the_symmetric_losss_two_query_passes_draw_the_same_dropout():
    """The k→q gradient is computed from query vectors encoded without gradient; with dropout
    the pass with gradient must draw the same masks, so its gradient is the plain loss's."""
    encoder, _, steps = _parts()
    encoder.set_dropout(0.1)
    settings = ContrastConfig(layer=2, queue_size=4, normalize=True, temperature=0.1, use_momentum=False,
                              in_batch_negatives=True, symmetric=True, margin=0.2)  # fmt: skip
    contrast = contrast_objective(encoder, settings)
    model = JointModel(encoder, [contrast]).train()
    batch = steps[0].xlco[0]
    views = lambda seed: model(side_pass=("xlco", "encode_step_views", (batch, seed)))  # noqa: E731
    assert torch.equal(views(7)[2], views(7)[2])
    assert not torch.equal(views(8)[2], views(7)[2])

    torch.manual_seed(3)
    contrast.before_micro_steps([batch], OneProcess(model))  # the step's keys; a seed for the batch's queries
    seed = contrast.query_seeds[0]
    model({"xlco": batch})["xlco"].loss_sum.backward()
    ours = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    encoder.zero_grad()
    with torch.random.fork_rng(devices=[]):  # the plain loss on the same masks
        torch.manual_seed(seed)
        q = contrast.encode_queries(encoder, batch.query.input_ids, batch.query.attention_mask)
    step = contrast.in_step_keys
    contrast.batch_contrast(q, step.keys[step.rows(batch.slots)]).loss_sum().backward()  # the batch's own keys, row by row
    assert ours.keys() == {n for n, p in encoder.named_parameters() if p.grad is not None}
    for name, p in encoder.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(ours[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)


class OneProcess:
    """The joint step's context for a model used alone in one process (no store, no timer)."""

    progress = False

    def __init__(self, model: JointModel):
        self.model = model

    def side_pass(self, objective: str, method: str, *args):
        return self.model(side_pass=(objective, method, args))

    def gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        return rows

    def phase(self, name: str):
        return contextlib.nullcontext()
