"""The same joint step written the straightforward way with Hugging Face transformers.

What a careful user would write without infoxlm's speed work, on the same batches and the
same initial weights as the engine:

- query encoder: ``XLMRobertaForMaskedLM`` with its default attention implementation; MMLM
  and TLM call it with ``labels`` (-100 at unmasked positions), so vocabulary logits are
  computed at every position of the padded batch;
- XLCO: the query pass runs the whole body with ``output_hidden_states`` and takes the
  ``<s>`` state (or the mean of the real tokens' states) of the universal layer; the key encoder is a deep copy of the whole masked-LM
  model, also run through every layer, without gradients;
- EMA as a Python loop over all key parameters (``k ← m·k + (1 − m)·q``);
- ``torch.optim.AdamW`` with neither the fused nor the foreach implementation; the global
  gradient norm clipped as the engine does; the same learning-rate schedule;
- projections, temperature, queue and loss normalisation with the semantics of
  ``objectives/xlco.py`` and the trainer (each objective the mean over its own units).

transformers is imported only here, so the rest of the package never needs it.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ..data.batching import MLMBatch
from ..data.pipeline import OBJECTIVES, StepData
from ..embedding import pool
from ..model.hub import BODY_PREFIX
from ..objectives.xlco import momentum_at
from ..train.joint_step import aligned_micro_batch, step_autocast
from ..train.optim import linear_warmup_decay
from .engine_step import EngineStep, StepOutcome
from .sizes import BenchError
from ..data.synthetic_batches import step_tokens
from .timing import PhaseTimer, optimizer_state_tensors, tensor_bytes

IGNORE_INDEX = -100


def require_transformers():
    """The transformers module, or a BenchError saying how to install it."""
    try:
        import transformers
    except ImportError:
        raise BenchError(
            "the Hugging Face baseline needs transformers, which is not installed: "
            "pip install 'infoxlm[hf]', or pass --no-baseline to time infoxlm alone"
        ) from None
    transformers.logging.set_verbosity_error()
    return transformers


def masked_lm_state_dict(engine: EngineStep) -> dict[str, torch.Tensor]:
    """The engine encoder's weights under ``XLMRobertaForMaskedLM``'s names.

    The encoder's names are Hugging Face's already (model/encoder.py): the body gains the
    ``roberta.`` prefix, the head keeps ``lm_head.``; the masked-LM class has no pooler, and its
    tied decoder weight and bias are the word embeddings and ``lm_head.bias``."""
    state = {}
    for key, tensor in engine.encoder.state_dict().items():
        if key.startswith("pooler.") or key == "lm_head.decoder.weight":
            continue
        state[key if key.startswith("lm_head.") else BODY_PREFIX + key] = tensor
    return state


class HFBaseline:
    """The baseline's models, optimizer and queue, copied from a freshly built ``EngineStep``."""

    name = "hf"

    def __init__(self, engine: EngineStep):
        transformers = require_transformers()
        if engine.steps_done:
            raise BenchError("the baseline must copy the engine's weights before the engine's first step")
        cfg, enc = engine.config, engine.encoder.config
        fields = {k: v for k, v in enc.to_hf_dict().items() if k not in ("architectures", "model_type")}
        fields.update(hidden_dropout_prob=cfg.model.dropout, attention_probs_dropout_prob=cfg.model.dropout)
        self.config = cfg
        self.device, self.world = engine.device, engine.world  # the engine's autocast: ``step_autocast``
        self.layer = cfg.contrast.layer
        self.temperature = cfg.contrast.temperature
        self.normalize = cfg.contrast.normalize
        self.pooling = cfg.contrast.pooling
        self.in_batch_negatives = cfg.contrast.in_batch_negatives

        model = transformers.XLMRobertaForMaskedLM(transformers.XLMRobertaConfig(**fields))
        missing, unexpected = model.load_state_dict(masked_lm_state_dict(engine), strict=False)
        tied = {"lm_head.decoder.weight", "lm_head.decoder.bias"}
        missing = [k for k in missing if k not in tied and not k.endswith(("position_ids", "token_type_ids"))]
        if missing or unexpected:
            raise BenchError(f"engine → transformers weight copy: missing {missing[:3]}, unexpected {unexpected[:3]}")
        self.model = model.to(self.device).train()
        self.key_model = copy.deepcopy(self.model).requires_grad_(False).eval()
        contrast = engine.contrast
        self.query_projection = copy.deepcopy(contrast.query_projection).to(self.device)
        self.key_projection = copy.deepcopy(contrast.key_projection).to(self.device).requires_grad_(False)
        self.queue = contrast.queue.detach().clone()  # (K, d), the engine's initial queue
        self.queue_pointer = int(contrast.queue_pointer)

        o = cfg.optim
        self.parameters = [*self.model.parameters(), *self.query_projection.parameters()]
        self.optimizer = torch.optim.AdamW(
            self.parameters, lr=o.lr, betas=tuple(o.betas), eps=o.eps, weight_decay=o.weight_decay,
            foreach=False, fused=False,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: linear_warmup_decay(s, o.warmup_steps, o.max_steps)
        )
        self.steps_done = 0

    def state_bytes(self) -> int:
        tensors = [*self.model.parameters(), *self.model.buffers(), *self.key_model.parameters()]
        tensors += [*self.key_model.buffers(), self.query_projection.weight, self.key_projection.weight, self.queue]
        return tensor_bytes(tensors + optimizer_state_tensors(self.optimizer))

    # --- the pieces of the step -------------------------------------------------------

    @staticmethod
    def labels(batch: MLMBatch) -> torch.Tensor:
        """(B, T) targets at masked positions, -100 elsewhere: what a data collator hands the model."""
        labels = torch.full_like(batch.input_ids, IGNORE_INDEX)
        labels[batch.masked_positions] = batch.targets
        return labels

    def _to_device(self, data: StepData) -> dict[str, list]:
        move = lambda t: t.to(self.device, non_blocking=True)  # noqa: E731
        return {
            "mmlm": [(move(b.input_ids), move(b.attention_mask), move(self.labels(b)), b.num_masked) for b in data.mmlm],
            "tlm": [(move(b.input_ids), move(b.attention_mask), move(self.labels(b)), b.num_masked) for b in data.tlm],
            "xlco": [
                (move(b.query.input_ids), move(b.query.attention_mask), move(b.key.input_ids), move(b.key.attention_mask), b.slots)
                for b in data.xlco
            ],
        }

    def _project(self, hidden: torch.Tensor, mask: torch.Tensor, projection: nn.Linear) -> torch.Tensor:
        z = projection(pool(hidden, mask, self.pooling))  # <s> state or mean of real tokens (B, d) → (B, d)
        return F.normalize(z, dim=-1) if self.normalize else z

    @torch.no_grad()
    def _keys(self, xlco) -> torch.Tensor:
        """The key vectors (B, d) of a micro-batch's pairs."""
        _, _, k_ids, k_mask, _ = xlco
        hidden = self.key_model.roberta(k_ids, attention_mask=k_mask, output_hidden_states=True).hidden_states
        return self._project(hidden[self.layer], k_mask, self.key_projection)

    def _step_keys(self, xlco_batches: list) -> tuple[torch.Tensor, torch.Tensor] | None:
        """With in-batch negatives: every key of the step (N, d) and its slot (N,), in slot order."""
        if not self.in_batch_negatives or not xlco_batches:
            return None
        keys = torch.cat([self._keys(b) for b in xlco_batches]).float()
        slots = torch.cat([b[4] for b in xlco_batches]).to(self.device)
        order = torch.argsort(slots)
        return keys[order], slots[order]

    def _contrast_loss_sum(self, xlco, step_keys=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Σ InfoNCE over the micro-batch's queries, and its keys (B, d). With in-batch
        negatives, ``step_keys`` holds every key of the step: a query's negatives are all of
        them but its own, whatever micro-batch it is in."""
        q_ids, q_mask, _, _, slots = xlco
        hidden = self.model.roberta(q_ids, attention_mask=q_mask, output_hidden_states=True).hidden_states
        q = self._project(hidden[self.layer], q_mask, self.query_projection)
        q32 = q.float()
        if step_keys is None:
            k32 = self._keys(xlco).float()
            columns = [(q32 * k32).sum(dim=-1, keepdim=True)]  # positive (B, 1)
        else:
            all_keys, all_slots = step_keys
            rows = torch.searchsorted(all_slots, slots.to(self.device))
            k32 = all_keys[rows]
            columns = [(q32 * k32).sum(dim=-1, keepdim=True)]  # positive (B, 1)
            own = rows[:, None] == torch.arange(all_keys.shape[0], device=self.device)  # (B, N)
            columns.append((q32 @ all_keys.t()).masked_fill(own, float("-inf")))  # the step's other keys
        columns.append(q32 @ self.queue.t().float())  # queue (B, K)
        logits = torch.cat(columns, dim=1) / self.temperature
        targets = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
        return F.cross_entropy(logits, targets, reduction="sum"), k32

    def _micro_losses(self, picked: dict, counts: dict[str, int], step_keys=None):
        """(joint loss of the micro-step, per-objective summed losses, keys or None)."""
        total, sums, keys = 0.0, {}, None
        for name in ("mmlm", "tlm"):
            if picked[name] is not None:
                ids, mask, labels, masked = picked[name]
                mean = self.model(input_ids=ids, attention_mask=mask, labels=labels).loss
                sums[name] = mean * masked
                total = total + sums[name] / counts[name]
        if picked["xlco"] is not None:
            sums["xlco"], keys = self._contrast_loss_sum(picked["xlco"], step_keys)
            total = total + sums["xlco"] / counts["xlco"]
        return total, sums, keys

    @torch.no_grad()
    def _enqueue(self, keys: torch.Tensor) -> None:
        K, n = self.queue.shape[0], keys.shape[0]
        keys = keys[-K:].to(self.queue.dtype)
        n = keys.shape[0]
        start = self.queue_pointer
        first = min(n, K - start)
        self.queue[start : start + first] = keys[:first]
        self.queue[: n - first] = keys[first:]
        self.queue_pointer = (start + n) % K

    # --- the step --------------------------------------------------------------------

    @torch.no_grad()
    def losses(self, data: StepData) -> dict[str, float]:
        """Mean loss per objective of a step's batches, in fp32, changing nothing."""
        counts = baseline_counts(data)
        batches = self._to_device(data)
        micro_steps = max(len(b) for b in batches.values())
        sums = dict.fromkeys(OBJECTIVES, 0.0)
        step_keys = self._step_keys(batches["xlco"])
        for i in range(micro_steps):
            picked = {name: aligned_micro_batch(b, i, micro_steps) for name, b in batches.items()}
            _, micro, _ = self._micro_losses(picked, counts, step_keys)
            for name, value in micro.items():
                sums[name] += float(value)
        return {name: sums[name] / counts[name] for name in OBJECTIVES if counts[name]}

    def step(self, data_for_step, index: int, timer: PhaseTimer) -> StepOutcome:
        cfg = self.config
        with timer("data"):
            data: StepData = data_for_step(index)
            batches = self._to_device(data)
        counts = baseline_counts(data)
        micro_steps = max(len(b) for b in batches.values())
        sums = dict.fromkeys(OBJECTIVES, 0.0)
        keys, key_slots = [], []
        with timer("forward"):
            with step_autocast(cfg, self.world):
                step_keys = self._step_keys(batches["xlco"])
        for i in range(micro_steps):
            picked = {name: aligned_micro_batch(b, i, micro_steps) for name, b in batches.items()}
            with timer("forward"):
                with step_autocast(cfg, self.world):
                    loss, micro, k = self._micro_losses(picked, counts, step_keys)
            with timer("backward"):
                loss.backward()
            for name, value in micro.items():
                sums[name] = sums[name] + value.detach()  # read once, after the step
            if k is not None:
                keys.append(k)
                key_slots.append(picked["xlco"][4])
        with timer("optimizer"):
            torch.nn.utils.clip_grad_norm_(self.parameters, cfg.optim.clip_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
        with timer("ema"):
            m = momentum_at(self.steps_done, cfg.contrast.momentum_schedule, base=cfg.contrast.momentum)
            with torch.no_grad():
                pairs = [*zip(self.key_model.parameters(), self.model.parameters())]
                pairs.append((self.key_projection.weight, self.query_projection.weight))
                for pk, pq in pairs:
                    pk.data.mul_(m).add_(pq.data, alpha=1 - m)
        with timer("queue"):
            if keys:
                slots = torch.cat(key_slots).to(self.device)
                self._enqueue(torch.cat(keys)[torch.argsort(slots)].float())
        self.steps_done += 1
        losses = {name: float(sums[name]) / counts[name] for name in OBJECTIVES if counts[name]}
        return StepOutcome(tokens=step_tokens(data), losses=losses)


def baseline_counts(data: StepData) -> dict[str, int]:
    """The paper's normalisers, as the baseline divides by them: masked tokens (MMLM, TLM), pairs (XLCO)."""
    return {"mmlm": data.stats["mmlm"].num_masked, "tlm": data.stats["tlm"].num_masked, "xlco": data.stats["xlco"].num_examples}
