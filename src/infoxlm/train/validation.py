"""Validation while pre-training (``infoxlm pretrain --validation STORE``): every
``run.eval_every`` steps and after the last, the MMLM and TLM losses on held-out text and the
top-1 retrieval of held-out translation pairs at the contrast layer.

The held-out data is a token store of its own (``infoxlm prepare`` on text the training store
does not hold), prepared with the training store's tokenizer. What is scored is fixed when
the run starts and is the same at every evaluation and in a resumed run:

* ``val/mmlm``, ``val/tlm``: the mean cross-entropy over the masked tokens of
  ``run.val_examples`` MMLM blocks and as many TLM pairs, drawn from the validation store by
  the training data's own rules (sampling, block packing, masking: data/pipeline.py) under a
  fixed seed, ``VALIDATION_SEED``, not the run's;
* ``val/retrieval_xx2en`` and ``val/retrieval_en2xx``: top-1 accuracy (%) of cosine
  nearest-neighbour search among the first ``run.val_pairs`` pairs of each English pair of the
  store (``de-en``, ``en-fr`` …), each sentence ``<s> sentence </s>`` pooled as mean over its
  tokens at ``contrast.layer`` (what ``infoxlm eval tatoeba`` reads by default), averaged over
  the pairs, and per language (``val/retrieval_xx2en/de``).

Validation draws no random numbers and changes no state: the model is put in eval mode (no
dropout) and back, nothing is computed with gradients, and the training data come from
another pipeline; a run with validation trains exactly as the same run without (tested).
Every rank computes the same numbers on the whole validation set (bounded: a few hundred
examples), so no collective is needed; under FSDP, which gathers weights only inside the
joint model's forward, validation is refused.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..data.batching import MLMBatch
from ..data.pipeline import DataPipeline
from ..data.store import TokenStore
from ..model.packing import Packing
from ..objectives.masked_lm import MaskedLM
from ..special_tokens import BOS_ID, EOS_ID, PAD_ID
from .config import TrainConfig
from .errors import TrainingError
from .joint_model import JointModel
from .joint_step import step_autocast
from .distributed import World

__all__ = ["Validation", "VALIDATION_SEED"]

VALIDATION_SEED = 20_240_601  # the held-out examples' draw: the same whatever run.seed is
MAX_SENTENCE_TOKENS = 128  # <s> sentence </s> for retrieval, as XLCO's views are cut


class Validation:
    """The held-out examples of a run, and their scores for the model as it is now.

    Args:
        root: the validation token store.
        config: the run's resolved config.
        train_store: the training store (the tokenizer must be the same, the store another).
    """

    def __init__(self, root: str | Path, config: TrainConfig, train_store: TokenStore):
        self.store = TokenStore.open(root)
        _check_store(self.store, train_store)
        r = config.run
        self.every, self.layer, self.config = r.eval_every, config.contrast.layer, config
        if r.parallelism == "fsdp":
            raise TrainingError(f"--validation {root}: not available with run.parallelism=fsdp; expected ddp")
        has_mono, has_pairs = bool(self.store.mono), bool(self.store.parallel)
        data = dataclasses.replace(
            config.data, seed=VALIDATION_SEED, xlco_batch_size=0,
            mmlm_batch_size=r.val_examples if has_mono else 0, tlm_batch_size=r.val_examples if has_pairs else 0,
        )  # fmt: skip
        step = DataPipeline(self.store, data).step(0) if data.enabled else None
        self.mmlm: list[MLMBatch] = step.mmlm if step is not None else []
        self.tlm: list[MLMBatch] = step.tlm if step is not None else []
        self.pairs = _retrieval_pairs(self.store, r.val_pairs)  # {xx: (xx sentences, en sentences)}
        if not (self.mmlm or self.tlm or self.pairs):
            raise TrainingError(f"--validation {root}: holds neither monolingual text nor translation pairs")

    def describe(self) -> str:
        """One line for the start of the run."""
        parts = []
        if self.mmlm:
            parts.append(f"MMLM {sum(b.num_examples for b in self.mmlm)} blocks")
        if self.tlm:
            parts.append(f"TLM {sum(b.num_examples for b in self.tlm)} pairs")
        if self.pairs:
            shown = ", ".join(f"{xx} {len(s[0])}" for xx, s in self.pairs.items())
            parts.append(f"retrieval xx→en at layer {self.layer} ({shown} pairs)")
        return f"  held out  {self.store.root}: {', '.join(parts)}; every {self.every:,} steps"

    def due(self, step: int, max_steps: int) -> bool:
        return step % self.every == 0 or step == max_steps

    @torch.no_grad()
    def scores(self, model: JointModel, world: World) -> dict[str, float]:
        """``val/…`` metrics of ``model`` now; its training mode is restored afterwards."""
        was_training = model.training
        model.eval()  # no dropout: nothing random is drawn
        autocast = step_autocast(self.config, world)
        out: dict[str, float] = {}
        try:
            for name, batches in (("mmlm", self.mmlm), ("tlm", self.tlm)):
                if batches:
                    out[f"val/{name}"] = _masked_lm_loss(model, batches, world.device, autocast)
            if self.pairs:
                out.update(self._retrieval(model.encoder, world.device, autocast))
        finally:
            model.train(was_training)
        return out

    def _retrieval(self, encoder, device: torch.device, autocast) -> dict[str, float]:
        out: dict[str, float] = {}
        for xx, (xx_side, en_side) in self.pairs.items():
            q = _sentence_vectors(encoder, xx_side, self.layer, device, autocast)  # (N, d)
            k = _sentence_vectors(encoder, en_side, self.layer, device, autocast)  # (N, d)
            similarity = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).T  # (N, N) cosines
            gold = torch.arange(len(q), device=q.device)
            out[f"val/retrieval_xx2en/{xx}"] = 100.0 * float((similarity.argmax(1) == gold).float().mean())
            out[f"val/retrieval_en2xx/{xx}"] = 100.0 * float((similarity.argmax(0) == gold).float().mean())
        for direction in ("xx2en", "en2xx"):
            values = [out[f"val/retrieval_{direction}/{xx}"] for xx in self.pairs]
            out[f"val/retrieval_{direction}"] = float(np.mean(values))
        return out


def _check_store(store: TokenStore, train_store: TokenStore) -> None:
    """Held-out data: another store, tokenized as the training store is."""
    if store.root.resolve() == train_store.root.resolve():
        raise TrainingError(f"--validation {store.root}: is the training store (--data); expected held-out data")
    mine = store.info.get("tokenizer", {}).get("fingerprint")
    theirs = train_store.info.get("tokenizer", {}).get("fingerprint")
    if mine != theirs:
        raise TrainingError(
            f"--validation {store.root}: tokenized with another tokenizer than --data {train_store.root}; "
            "expected a store prepared with the same tokenizer (infoxlm prepare --tokenizer …)"
        )


def _masked_lm_loss(model: JointModel, batches: list[MLMBatch], device: torch.device, autocast) -> float:
    """Mean cross-entropy over all masked tokens of ``batches``."""
    total, objective = 0.0, MaskedLM("held-out")
    for batch in batches:
        with autocast:
            predicted = objective.loss(model.encoder, batch.to(device))  # the masked tokens' states
            total += float(model.vocabulary_losses({"held-out": predicted})["held-out"].loss_sum)
    return total / max(1, sum(b.num_masked for b in batches))


def _retrieval_pairs(store: TokenStore, limit: int) -> dict[str, tuple[list[np.ndarray], list[np.ndarray]]]:
    """The first ``limit`` pairs of every pair with English on one side: {xx: (xx side, en side)}."""
    out = {}
    for name, corpus in sorted(store.parallel.items()):
        src, tgt = corpus.languages
        if "en" not in (src, tgt) or src == tgt:
            continue
        n = min(limit, corpus.num_pairs)
        if n < 2:  # one candidate: every search is right
            continue
        sides = [corpus.src[i] for i in range(n)], [corpus.tgt[i] for i in range(n)]
        xx, en = (sides[1], sides[0]) if src == "en" else sides
        out[tgt if src == "en" else src] = (xx, en)
    return out


def _sentence_vectors(encoder, sentences: list[np.ndarray], layer: int, device: torch.device, autocast) -> torch.Tensor:
    """(N, d) fp32: each ``<s> sentence </s>`` at hidden_states[layer], mean over its tokens."""
    rows = [np.concatenate([[BOS_ID], s[: MAX_SENTENCE_TOKENS - 2], [EOS_ID]]) for s in sentences]
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), PAD_ID, dtype=torch.long)  # (N, T)
    for i, r in enumerate(rows):
        input_ids[i, : len(r)] = torch.from_numpy(r.astype(np.int64))
    attention_mask = (input_ids != PAD_ID).long()  # (N, T)
    packing = Packing.of(attention_mask)
    with autocast:
        tokens = encoder(input_ids.to(device), attention_mask.to(device), num_layers=layer, packing=packing.to(device)).token_states()
    return packing.to(device).sequence_means(tokens).float()
