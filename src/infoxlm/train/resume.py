"""What a checkpoint may resume into, and loading it.

A run directory's newest intact checkpoint (``Resume.find``) is read in two parts: before the
model is built, its numbers and configs, to refuse at once, in one line, a resume on other
data or with a config it cannot take (``check``, ``check_encoder``); once the model is built
and in parallel, its tensors (``load_into``), whatever the number of processes that wrote it.

A checkpoint's tensors are the encoder's ("model", what ``infoxlm export`` reads), the
contrast's ("contrast": key encoder, projections, queue) and AdamW's state keyed by parameter
name (``tensor_state``); ``JointModel`` holds the first two under "encoder." and "contrast."
(``split_state`` and ``joined_state`` go between the two layouts).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import torch

from ..model.config import EncoderConfig
from ..json_files import RECORD_BYTES, read_json
from .checkpoint import is_sharded_checkpoint, load_checkpoint, load_sharded_into, resume_checkpoint, state_json
from .config import EXECUTION_FIELDS, OptimConfig, TrainConfig
from .distributed import World
from .errors import CheckpointCorrupt, TrainingError
from .joint_step import JointStep
from .optim import learning_rate_multiplier
from .store_identity import corpus_changes, tokenizer_change

# What a run reads from a sharded checkpoint before it builds the model (to check the resume).
RESUME_CHECK_KEYS = ("step", "config", "encoder_config", "store_identity", "scheduler")
STORE_IDENTITY_FILE = "store_identity.json"  # RUN/: the store identity of the latest start
# What the checkpoint's tensors fix (their presence and shapes): no config change moves them.
CONTRAST_SHAPE_FIELDS = ("contrast.layer", "contrast.queue_size", "contrast.use_momentum")


@dataclasses.dataclass
class Resume:
    """The checkpoint a run continues from and what was read of it before the model is built
    (a sharded checkpoint's numbers and configs; a single-file one, an earlier release's, whole)."""

    run_dir: Path
    checkpoint: Path
    state: dict[str, Any]

    @classmethod
    def find(cls, run_dir: Path, world: World) -> "Resume | None":
        """The newest intact checkpoint in ``run_dir`` (saying what it passes over), or None."""
        found = resume_checkpoint(run_dir, world)
        if found is None:
            return None
        keys = RESUME_CHECK_KEYS if is_sharded_checkpoint(found) else None
        return cls(run_dir, found, load_checkpoint(found, map_location=world.device, keys=keys))

    @property
    def step(self) -> int:
        return int(self.state["step"])

    @property
    def where(self) -> str:
        return f"{self.run_dir}: {self.checkpoint.name}"

    def check(
        self, config: TrainConfig, store_root: Path, store_identity: dict, *, allow_config_change: bool,
        allow_data_change: bool, warn: bool = True,
    ) -> None:
        """Refuse, in one line, to continue the checkpoint on other data or with a config it cannot
        take; with ``warn``, say on stderr how an accepted change moves the learning rate."""
        self._check_data(store_root, store_identity, allow_data_change)
        saved = state_json(self.state, "config", self.checkpoint) if "config" in self.state else None
        if saved is None:
            return
        resolved = json.loads(config.to_json())
        defaults = json.loads(TrainConfig().to_json())
        changed = [c for c in changed_fields(saved, resolved, defaults) if c.split(":")[0] not in EXECUTION_FIELDS]
        if not changed:
            return
        if not allow_config_change:
            raise TrainingError(
                f"{self.run_dir}: holds a run with a different config ({', '.join(changed[:5])}); "
                "use another --output, or --allow-config-change to continue it with the new config"
            )
        self._check_contrast_shape(saved, resolved, "xlco" in config.data.enabled)
        note = learning_rate_jump(saved.get("optim", {}), config.optim, self.step)
        if note and warn:
            print(note, file=sys.stderr, flush=True)

    def _check_data(self, store_root: Path, store_identity: dict, allow_data_change: bool) -> None:
        before = checkpoint_store_identity(self.state, self.run_dir, self.checkpoint)
        if before is None:
            return
        changed_tokenizer = tokenizer_change(before, store_identity)
        if changed_tokenizer:
            raise TrainingError(
                f"{self.where} was trained on a store with another tokenizer than {store_root} "
                f"({changed_tokenizer}); a run cannot change its tokenizer, not even with --allow-config-change: "
                "use the run's store, or another --output"
            )
        changes = corpus_changes(before, store_identity)
        if changes and not allow_data_change:
            raise TrainingError(
                f"{store_root}: not the data {self.where} was trained on ({'; '.join(changes[:4])}); "
                "resuming would change every later step's examples: use the run's store, or "
                "--allow-data-change to continue on the store as it is now"
            )

    def _check_contrast_shape(self, saved: dict, resolved: dict, xlco_after: bool) -> None:
        """XLCO on or off, and the fields that shape its tensors, as the checkpoint has them;
        the encoder's own shape is compared once it is built (``check_encoder``)."""
        xlco_before = saved.get("data", {}).get("xlco_batch_size", 0) > 0
        if xlco_before != xlco_after:
            raise TrainingError(
                f"{self.where}: XLCO was {'on' if xlco_before else 'off'} and the new config turns it "
                f"{'on' if xlco_after else 'off'} (data.xlco_batch_size); the checkpoint's key encoder and "
                "queue cannot follow: use another --output"
            )
        if not xlco_before:
            return
        for name in CONTRAST_SHAPE_FIELDS:
            section, field_name = name.split(".")
            a, b = saved.get(section, {}).get(field_name), resolved[section][field_name]
            if a != b:
                raise TrainingError(
                    f"{self.where}: {name} {a!r} → {b!r} cannot be applied to a run (its key encoder and queue "
                    "are shaped by it), not even with --allow-config-change: use another --output"
                )

    def check_encoder(self, encoder_config: EncoderConfig) -> None:
        """The new config's encoder must have the checkpoint's shape (dropout may differ)."""
        saved = state_json(self.state, "encoder_config", self.checkpoint)
        now = dataclasses.asdict(encoder_config)
        ignored = {"hidden_dropout_prob", "attention_probs_dropout_prob"}
        differ = [f"{k} {saved.get(k)!r} → {now.get(k)!r}" for k in sorted(set(saved) | set(now))
                  if k not in ignored and saved.get(k) != now.get(k)]  # fmt: skip
        if differ:
            raise TrainingError(
                f"{self.run_dir}: {self.checkpoint.name} holds a model of another shape than the config asks for "
                f"({', '.join(differ[:4])}; see model.size, model.overrides, model.init); a run cannot change "
                "its model's shape, not even with --allow-config-change: use another --output"
            )

    def load_into(self, step: JointStep, config: TrainConfig) -> None:
        """The checkpoint's tensors into the step's model and optimizer, its schedule into the
        scheduler, then the config's optimizer settings over the saved ones."""
        try:
            if is_sharded_checkpoint(self.checkpoint):
                self._load_sharded(step)
            else:
                self._load_single_file(step)
            step.scheduler.load_state_dict(self.state["scheduler"])
        except CheckpointCorrupt:
            raise  # names the damaged file: not a matter of the config
        except (RuntimeError, KeyError, ValueError, TypeError) as err:  # a checkpoint the checks above did not foresee
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise TrainingError(f"{self.where} does not fit the model of this config ({first})") from None
        apply_optim_config(step.optimizer, step.scheduler, config.optim)

    def _load_sharded(self, step: JointStep) -> None:
        """Every rank reads the slices it holds (whole tensors under DDP, its shards under FSDP),
        whatever the number of processes that wrote the checkpoint."""
        from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

        state = tensor_state(step.model, step.optimizer)
        load_sharded_into(self.checkpoint, state, step.world.distributed)
        set_model_state_dict(step.model, joined_state(state))
        set_optimizer_state_dict(step.model, step.optimizer, state["optimizer"])

    def _load_single_file(self, step: JointStep) -> None:
        if step.sharded:
            raise TrainingError(
                f"{self.where} is a single-file checkpoint (an earlier release's); "
                "continue it with run.parallelism=ddp until its next checkpoint, which is sharded"
            )
        step.model.encoder.load_state_dict(self.state["model"])
        if step.model.contrast is not None:
            step.model.contrast.load_state_dict(self.state["contrast"])
        step.optimizer.load_state_dict(self.state["optimizer"])


def apply_optim_config(optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LambdaLR, cfg: OptimConfig) -> None:
    """The optimizer's state dict brings back the hyperparameters it was saved with; the
    config's win (the same values unless --allow-config-change changed them)."""
    scheduler.base_lrs = [cfg.lr for _ in optimizer.param_groups]
    lrs = []
    for group in optimizer.param_groups:
        group.update(betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, initial_lr=cfg.lr)
        # What LambdaLR computes at this step: base_lr × multiplier.
        group["lr"] = cfg.lr * learning_rate_multiplier(
            scheduler.last_epoch, cfg.warmup_steps, cfg.max_steps, cfg.schedule, cfg.decay_fraction
        )
        lrs.append(group["lr"])
    scheduler._last_lr = lrs


SCHEDULE_FIELDS = ("lr", "warmup_steps", "max_steps", "schedule", "decay_fraction")  # what sets a step's rate


def learning_rate_jump(saved: dict, now: OptimConfig, step: int) -> str | None:
    """A note when the schedule fields changed by --allow-config-change move the learning rate of
    the step a run continues from (a finished run extended with more steps re-stretches its
    schedule: from 0 back to near the peak); None when it stays."""
    before = OptimConfig(**{**dataclasses.asdict(OptimConfig()), **saved})
    rate = lambda o: o.lr * learning_rate_multiplier(step, o.warmup_steps, o.max_steps, o.schedule, o.decay_fraction)  # noqa: E731
    old, new = rate(before), rate(now)
    if math.isclose(old, new, rel_tol=1e-9, abs_tol=1e-15):
        return None
    fields = [f"optim.{k} {getattr(before, k)} → {getattr(now, k)}" for k in SCHEDULE_FIELDS if getattr(before, k) != getattr(now, k)]
    return f"note: {', '.join(fields)}: the learning rate at step {step} moves from {old:.2e} to {new:.2e} (the schedule is recomputed over the new values)"


def tensor_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The run's tensors as this rank holds them (DTensors under FSDP), keyed by name:
    model (the encoder), contrast (key encoder, projections, queue) and optimizer (AdamW's
    state keyed by parameter name, so that it loads into any world size)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    state = split_state(get_model_state_dict(model))
    state["optimizer"] = get_optimizer_state_dict(model, optimizer)
    return state


# Where a JointModel submodule's state sits in a checkpoint: the encoder under "model", XLCO's
# unit under "contrast" (both read by `infoxlm export` and earlier releases); the state of any
# other objective with tensors of its own under "objective.NAME".
CHECKPOINT_PARTS = {"encoder": "model", "contrast": "contrast"}
OTHER_OBJECTIVE = "objective."


def split_state(joint_state: dict[str, Any]) -> dict[str, Any]:
    """JointModel's state dict → {"model": the encoder's, "contrast": the contrast's or None,
    "objective.NAME": another objective's}: the layout of every infoxlm checkpoint."""
    parts: dict[str, Any] = {"model": {}, "contrast": {}}
    for name, value in joint_state.items():
        part, _, rest = name.partition(".")
        parts.setdefault(CHECKPOINT_PARTS.get(part, OTHER_OBJECTIVE + part), {})[rest] = value
    parts["contrast"] = parts["contrast"] or None
    return parts


def joined_state(state: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``split_state``: JointModel's state dict."""
    joined = {f"encoder.{k}": v for k, v in state["model"].items()}
    joined.update({f"contrast.{k}": v for k, v in (state["contrast"] or {}).items()})
    for part, tensors in state.items():
        if part.startswith(OTHER_OBJECTIVE):
            joined.update({f"{part[len(OTHER_OBJECTIVE):]}.{k}": v for k, v in tensors.items()})
    return joined


def checkpoint_store_identity(state: dict[str, Any], run_dir: Path, checkpoint: Path) -> dict[str, Any] | None:
    """The store identity a checkpoint was trained on (RUN/store_identity.json for checkpoints
    written before it was kept in them; None when neither has it)."""
    if "store_identity" in state:
        return state_json(state, "store_identity", checkpoint)
    path = run_dir / STORE_IDENTITY_FILE
    if not os.path.lexists(path):
        return None
    expected = "the store identity infoxlm pretrain records (the data the run was trained on)"
    identity = read_json(path, what=expected, max_bytes=RECORD_BYTES, error=TrainingError)
    if not isinstance(identity, dict):
        raise TrainingError(f"{path}: expected a JSON object ({expected}), found {type(identity).__name__}")
    return identity


def changed_fields(before: dict, after: dict, defaults: dict, prefix: str = "") -> list[str]:
    """The fields whose value differs between two configs as dicts, "section.field: a → b".

    A field ``before`` lacks was added to infoxlm after that run was written: the run computed
    what the field's default does, so keeping the default (``defaults``, the dataclasses'
    own) is no change, and such a run resumes without --allow-config-change.

    >>> changed_fields({"c": {"t": 0.1}}, {"c": {"t": 0.1, "margin": 0.0}}, {"c": {"t": 0.05, "margin": 0.0}})
    []
    >>> changed_fields({"c": {"t": 0.1}}, {"c": {"t": 0.2, "margin": 0.3}}, {"c": {"t": 0.05, "margin": 0.0}})
    ['c.margin: None → 0.3', 'c.t: 0.1 → 0.2']
    """
    changed = []
    for key in sorted(set(before) | set(after)):
        a, b, default = before.get(key), after.get(key), defaults.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changed += changed_fields(a, b, default if isinstance(default, dict) else {}, f"{prefix}{key}.")
        elif key not in before and key in defaults and b == default:
            continue
        elif a != b:
            changed.append(f"{prefix}{key}: {a!r} → {b!r}")
    return changed
