"""The trainable part of a run in one module: what the optimizer updates and DDP synchronises.

It holds the encoder (with its tied MLM head) and the run's objectives (objectives/), each
under its ``state_key`` (XLCO's "contrast": its query projection trains with the encoder,
while its key encoder and key projection need no gradient, so DDP leaves them alone, and its
queue is a buffer). One ``forward`` call computes one micro-step's summed losses for the
objectives the micro-step carries, so DDP sees exactly one forward per backward; an
objective's work outside the losses (XLCO's keys) also goes through ``forward``
(``side_pass``), so that FSDP gathers the weights it reads.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..model.encoder import Encoder
from ..objectives.objective import LossTerm, Objective, VocabularyTargets
from ..objectives.vocab_loss import token_cross_entropy

# Rows of the head's logits then start at 128-byte boundaries in bf16 (64 × 2 bytes).
VOCAB_MULTIPLE_ON_GPU = 64

MicroStepLosses = dict[str, LossTerm]  # objective name → its summed loss on the micro-step


class JointModel(nn.Module):
    """The encoder runs the fast paths it was built with (``encoder.fast_paths``; the key
    encoder has the same): on real tokens only, the top layer on the rows the losses read, the
    in-place word gradient (a single process only), and on a GPU the head's product padded
    to a multiple of 64 columns (``padded_vocab_logits``; the loss gives the padding
    probability 0) and the cross-entropy over it in fused kernels (``fused_vocab_loss``).
    """

    def __init__(self, encoder: Encoder, objectives: list[Objective]):
        super().__init__()
        self.encoder = encoder
        for objective in objectives:  # submodules: trained, saved and distributed with the encoder
            self.add_module(objective.state_key, objective)
        self._state_keys = {o.name: o.state_key for o in objectives}  # in the joint loss's order

    @property
    def objectives(self) -> list[Objective]:
        """The run's objectives, in the joint loss's order."""
        return [self.objective(name) for name in self._state_keys]

    def objective(self, name: str) -> Objective:
        return self._modules[self._state_keys[name]]

    @property
    def contrast(self) -> Objective | None:
        """XLCO's unit (key encoder, projections, queue), for those who inspect it; None without XLCO."""
        return self.objective("xlco") if "xlco" in self._state_keys else None

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def unreached_parameters(self, names: list[str]) -> list[nn.Parameter]:
        """Trainable parameters that a micro-step with these objectives leaves out of the graph
        (MMLM and TLM reach everything but XLCO's query projection; XLCO alone the embeddings,
        the layers up to the universal one and its projection)."""
        reached_ids = {id(p) for name in names for p in self.objective(name).reached_parameters(self.encoder)}
        return [p for p in self.trainable_parameters() if id(p) not in reached_ids]

    def forward(
        self,
        batches: dict[str, Any] | None = None,
        touch_unreached: bool = False,
        side_pass: tuple[str, str, tuple] | None = None,
    ) -> MicroStepLosses | Any:
        """``batches``: objective name → its micro-batch for this micro-step → name → its
        ``LossTerm``; a filler's (``data.batching.filler_mlm_batch``) stays in the graph, so
        that its backward runs the modules every rank runs, but counts 0, extras none.

        touch_unreached adds (under the key "") 0 × one element of every trainable parameter
        that this micro-step's objectives do not reach (layers above the universal layer in an
        XLCO-only micro-step, the query projection while XLCO is off), so that each parameter
        takes part in the graph. The step touches on a step's last micro-step, in one process
        and under DDP (FSDP gives such parameters zero gradients after the backward instead):
        DDP then never meets an unused parameter, and every parameter has a gradient (zero,
        not missing: AdamW decays and moves a parameter with a zero gradient and skips one
        with none) with one process or many.

        side_pass ``(name, method, args)``: ``objective.method(encoder, *args)`` instead, its
        result returned (XLCO's keys before a step's queries, its queue's pre-fill)."""
        if side_pass is not None:
            name, method, args = side_pass
            return getattr(self.objective(name), method)(self.encoder, *args)
        out: MicroStepLosses = {}
        predictions: dict[str, VocabularyTargets] = {}
        # The head runs right after the last token-predicting objective, before any later one's
        # forward: the backward then adds up the shared weights' gradients (the tied word
        # embeddings) in one order, MMLM and TLM's head, then XLCO.
        predictors = [name for name in batches if self.objective(name).predicts_tokens]
        for name, batch in batches.items():
            term = self.objective(name).loss(self.encoder, batch)
            if isinstance(term, VocabularyTargets):
                predictions[name] = term
            else:
                out[name] = _counted(term, batch)
            if predictors and name == predictors[-1]:
                out.update({n: _counted(t, batches[n]) for n, t in self.vocabulary_losses(predictions).items()})
        out = {name: out[name] for name in batches}  # in the joint loss's order
        if touch_unreached:
            unreached = self.unreached_parameters(list(batches))
            if unreached:
                out[""] = LossTerm(sum(p.view(-1)[0] for p in unreached) * 0.0)
        return out

    def vocabulary_losses(self, predictions: dict[str, VocabularyTargets]) -> dict[str, LossTerm]:
        """Σ cross-entropy of each objective's targets; vocabulary logits only at those rows.

        One head call for all of them, so that the V × d decoder (tied word-embedding)
        gradient is made once per micro-step, not once per objective; the head is row-wise,
        so each sum is what a call of its own gives."""
        if not predictions:
            return {}
        parts = list(predictions.values())
        states = torch.cat([p.states for p in parts]) if len(parts) > 1 else parts[0].states  # (ΣN_i, d)
        vocab_multiple = VOCAB_MULTIPLE_ON_GPU if states.is_cuda and self.encoder.fast_paths.padded_vocabulary else 1
        logits = self.encoder.lm_head(states, vocab_multiple=vocab_multiple)  # (ΣN_i, V), or V padded
        targets = torch.cat([p.targets for p in parts]) if len(parts) > 1 else parts[0].targets  # (ΣN_i,)
        fused = self.encoder.fast_paths.fused_vocab_loss  # the Triton kernels, where they run (a GPU)
        per_token = token_cross_entropy(logits, targets, fused=fused)  # (ΣN_i,) fp32
        sums = per_token.split([p.states.shape[0] for p in parts])
        return {name: LossTerm(part.sum()) for name, part in zip(predictions, sums)}


def _counted(term: LossTerm, batch) -> LossTerm:
    """A filler's loss (``data.batching.filler_mlm_batch``) stays in the graph, so that its
    backward pass runs the modules every rank runs, but counts 0 and reports nothing."""
    return LossTerm(term.loss_sum * 0.0) if batch.filler else term
