"""``infoxlm pretrain``: the run around the joint step (joint_step.py): check and create the
run directory, build or resume the model, then for each step: data → the joint step → log →
save, until the last step, ``--stop-at`` or a scheduler's signal.

Exactness: a step's data and every random choice in it are functions of (seed, step, example
slot) (see data/pipeline.py), and the torch RNG (dropout) is reseeded from (seed, step, rank)
at every step, so a run resumed from a checkpoint computes exactly what the uninterrupted run
computes. Losses are normalised by *global* counts (all ranks, all micro-batches), so the
gradient does not depend on how the global batch is split over processes or micro-batches.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Sequence

import torch
from tqdm.auto import tqdm

from .. import interrupt
from ..data.pipeline import DataPipeline
from ..data.store import TokenStore
from ..export.model_card import DATA_SUMMARY_NAME, data_summary, write_model_card
from ..model.config import EncoderConfig
from ..model.encoder import Encoder
from ..model.fast_paths import FastPaths
from ..objectives.xlco import MomentumContrast
from ..outputs import atomic_dir, atomic_file, check_output_dir, is_run_directory
from ..tokenizer import Tokenizer
from .checkpoint import (
    CheckpointWriter,
    checkpoint_path,
    is_sharded_checkpoint,
    last_good_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_sharded_into,
    refuse_non_finite,
    resume_checkpoint,
)
from .config import EXECUTION_FIELDS, TrainConfig, resolve_config
from .console import bar_postfix, config_summary, step_line
from .distributed import (
    World,
    all_reduce_sum,
    barrier,
    init_world,
    is_collective_timeout,
    keep_until_exit,
    shutdown,
)
from .errors import CheckpointCorrupt, TrainingError
from .export import write_run_encoder
from .model_source import open_model, resolve_model
from .joint_step import NO_PHASES, StepPhases, build_joint_step, computes_in_bf16, even_out
from .metrics import TENSORBOARD_CLOSE_TIMEOUT_S, MetricsLog, WandbSink
from .flops import ModelShape, mfu, peak_bf16_flops, step_data_flops
from .optim import linear_warmup_decay
from .parallelism import is_sharded, whole_state
from .run_lock import RunLock
from .stopping import RunStopped, StopRequest
from .step_estimate import estimate_step
from .token_budget import resolve_max_tokens
from .store_identity import TOKENIZER_FILES, corpus_changes, store_identity, tokenizer_change, tokenizer_file_fingerprints

# The queue pre-fill draws its own XLCO examples, from a seed stream apart from training's.
PREFILL_SEED_OFFSET = 1_000_003
STORE_IDENTITY_FILE = "store_identity.json"  # RUN/: the store identity of the latest start


class Trainer:
    """Everything one run holds; ``run()`` is the loop."""

    def __init__(
        self,
        config: TrainConfig,
        data: str | Path,
        output: str | Path,
        *,
        allow_config_change: bool = False,
        allow_data_change: bool = False,
        progress: bool = True,
        preset: str | None = None,
        notes: Sequence[str] = (),
    ):
        self.preset = preset  # the name the config started from, for the summary printed at the start
        # What the command settled about the config (the contrast layer --init gave, warnings):
        # said after the summary, once the run has started, so that a run that cannot start
        # says only why.
        self.notes = list(notes)
        # Everything is checked before anything is allocated or written: the config, the run
        # directory's place, the device, the store and (on resume) the checkpoint against both.
        self.config = config.validate()
        self.run_dir = Path(output)
        # New, empty, or a run to resume; never the store it reads.
        check_output_dir(self.run_dir, flag=None, sources=[("token store", data)], written_by_us=is_run_directory)
        self.world: World = init_world(config.run.device, config.run.collective_timeout_s)
        # One command at a time in RUN: locked before anything in it is read or written.
        self.run_lock = RunLock.acquire(self.run_dir, self.world)
        try:
            self._start(config, data, allow_config_change, allow_data_change, progress)
        except BaseException:
            self.run_lock.release(started=False)  # a command that cannot start leaves RUN as it was
            raise

    def _start(self, config: TrainConfig, data: str | Path, allow_config_change: bool, allow_data_change: bool, progress: bool) -> None:
        # The seed of the data, and what is left to the device (compiling on a GPU).
        self.config = resolve_config(self.config, self.world.device)
        self.progress = progress and self.world.is_main
        self.store = TokenStore.open(data)
        self.store_identity = store_identity(self.store)
        found = resume_checkpoint(self.run_dir, self.world)  # the newest intact one, saying what it passes over
        self.resume_from = found
        # A sharded checkpoint's numbers and configs now, its tensors once the model is built;
        # a single-file one (an earlier release's) whole.
        resume_state = None
        if found is not None:
            keys = RESUME_CHECK_KEYS if is_sharded_checkpoint(found) else None
            resume_state = load_checkpoint(found, map_location=self.world.device, keys=keys)
        if resume_state is not None:
            self._check_resume(resume_state, found, allow_config_change, allow_data_change)
        elif config.model.init:
            self._check_init_tokenizer(config.model.init)
        self.pipeline = DataPipeline(self.store, self.config.data)

        torch.manual_seed(config.run.seed)  # the fresh weights
        self.encoder = self._build_encoder()
        if resume_state is not None:
            self._check_encoder_shape(resume_state, found)
        self.contrast = self._build_contrast()
        self.joint_step = build_joint_step(self.config, self.world, self.encoder, self.contrast, run_dir=self.run_dir)
        step = self.joint_step
        self.model, self.ddp, self.optimizer, self.scheduler = step.model, step.ddp, step.optimizer, step.scheduler
        r = self.config.run
        self.checkpoints = CheckpointWriter(
            self.run_dir, self.world.rank, self.world.distributed, keep=r.keep_checkpoints, asynchronous=r.async_checkpoint,
            timeout=timedelta(seconds=r.collective_timeout_s),
        )  # fmt: skip
        shape = self.encoder.config
        self.shape = ModelShape(shape.hidden_size, shape.intermediate_size, shape.num_hidden_layers, shape.vocab_size)
        on_gpu_in_bf16 = self.world.device.type == "cuda" and computes_in_bf16(self.config, self.world)
        self.peak_flops = peak_bf16_flops(torch.cuda.get_device_name(self.world.device)) if on_gpu_in_bf16 else None
        self.step = 0
        self.stop = StopRequest()  # pretrain() hands in its own: --stop-at, SIGTERM / SIGUSR1
        self.stopped: str | None = None  # why the run stopped before its last step, once it has
        # Before the resume loads AdamW's state: the estimate counts it as still to come.
        self._choose_max_tokens(first_step=int(resume_state["step"]) if resume_state is not None else 0)
        if resume_state is not None:
            self._resume(resume_state, found)
        self._write_run_directory()  # only now: a run that cannot start leaves nothing changed

    def close(self) -> None:
        """Leave the process group and the run directory to the next command."""
        if self.world.distributed:
            keep_until_exit(self.ddp)
        shutdown(self.world)
        self.run_lock.release()

    # --- set-up ---------------------------------------------------------------------------

    def _check_resume(self, state: dict[str, Any], checkpoint: Path, allow_config_change: bool, allow_data_change: bool) -> None:
        """Refuse, in one line, to continue a checkpoint on other data or with a config it cannot take."""
        where = f"{self.run_dir}: {checkpoint.name}"
        before = _checkpoint_store_identity(state, self.run_dir)
        if before is not None:
            changed_tokenizer = tokenizer_change(before, self.store_identity)
            if changed_tokenizer:
                raise TrainingError(
                    f"{where} was trained on a store with another tokenizer than {self.store.root} "
                    f"({changed_tokenizer}); a run cannot change its tokenizer, not even with --allow-config-change: "
                    "use the run's store, or another --output"
                )
            changes = corpus_changes(before, self.store_identity)
            if changes and not allow_data_change:
                raise TrainingError(
                    f"{self.store.root}: not the data {where} was trained on ({'; '.join(changes[:4])}); "
                    "resuming would change every later step's examples: use the run's store, or "
                    "--allow-data-change to continue on the store as it is now"
                )
        saved = json.loads(state["config"]) if "config" in state else None
        if saved is None:
            return
        resolved = json.loads(self.config.to_json())
        defaults = json.loads(TrainConfig().to_json())
        changed = [c for c in changed_fields(saved, resolved, defaults) if c.split(":")[0] not in EXECUTION_FIELDS]
        if not changed:
            return
        if not allow_config_change:
            raise TrainingError(
                f"{self.run_dir}: holds a run with a different config ({', '.join(changed[:5])}); "
                "use another --output, or --allow-config-change to continue it with the new config"
            )
        # What the checkpoint's tensors fix (their presence and shapes) cannot change; the
        # encoder's own shape is compared once it is built (_check_encoder_shape).
        fixed = ["contrast.layer", "contrast.queue_size", "contrast.use_momentum"]
        xlco_before = saved.get("data", {}).get("xlco_batch_size", 0) > 0
        xlco_after = "xlco" in self.config.data.enabled
        if xlco_before != xlco_after:
            raise TrainingError(
                f"{where}: XLCO was {'on' if xlco_before else 'off'} and the new config turns it "
                f"{'on' if xlco_after else 'off'} (data.xlco_batch_size); the checkpoint's key encoder and "
                "queue cannot follow: use another --output"
            )
        if xlco_before:
            for name in fixed:
                section, field_name = name.split(".")
                a, b = saved.get(section, {}).get(field_name), resolved[section][field_name]
                if a != b:
                    raise TrainingError(
                        f"{where}: {name} {a!r} → {b!r} cannot be applied to a run (its key encoder and queue "
                        "are shaped by it), not even with --allow-config-change: use another --output"
                    )

    def _check_encoder_shape(self, state: dict[str, Any], checkpoint: Path) -> None:
        """The new config's encoder must have the checkpoint's shape (dropout may differ)."""
        saved = json.loads(state["encoder_config"])
        now = dataclasses.asdict(self.encoder.config)
        ignored = {"hidden_dropout_prob", "attention_probs_dropout_prob"}
        differ = [f"{k} {saved.get(k)!r} → {now.get(k)!r}" for k in sorted(set(saved) | set(now))
                  if k not in ignored and saved.get(k) != now.get(k)]
        if differ:
            raise TrainingError(
                f"{self.run_dir}: {checkpoint.name} holds a model of another shape than the config asks for "
                f"({', '.join(differ[:4])}; see model.size, model.overrides, model.init); a run cannot change "
                "its model's shape, not even with --allow-config-change: use another --output"
            )

    def _check_init_tokenizer(self, init: str) -> None:
        """--init's tokenizer must be the store's: the model's ids must mean the store's pieces."""
        source = resolve_model(init, flag="--init")
        theirs = tokenizer_file_fingerprints(source.tokenizer) if source.tokenizer is not None else {}
        ours = self.store_identity["tokenizer"]["fingerprint"]
        if not theirs:
            if self.world.is_main:
                print(
                    f"warning: --init {init} has no tokenizer file ({' or '.join(TOKENIZER_FILES)}); "
                    f"cannot check that {self.store.root} was tokenized with the model's tokenizer",
                    file=sys.stderr,
                    flush=True,
                )
            return
        if ours not in theirs.values():
            name, fingerprint = next(iter(theirs.items()))
            raise TrainingError(
                f"--init {init}: its tokenizer ({name}, {fingerprint[:12]}…) is not the one {self.store.root} "
                f"was tokenized with ({ours[:12] if ours else None}…); prepare the store with the model's tokenizer"
            )

    def _write_run_directory(self) -> None:
        if not self.world.is_main:
            return
        # Each file complete or absent: a torn config.json would make the run directory unrecognisable.
        summary = data_summary(self.store, self.config.data.alpha, self.config.data.sampling_unit)  # for the model cards of its exports
        for name, text in (
            ("config.json", self.config.to_json()),
            (STORE_IDENTITY_FILE, json.dumps(self.store_identity, indent=2, sort_keys=True)),
            (DATA_SUMMARY_NAME, json.dumps(summary, indent=2)),
        ):
            with atomic_file(self.run_dir / name) as tmp:
                tmp.write_text(text + "\n")
        self._copy_tokenizer()

    def _copy_tokenizer(self) -> None:
        """Keep the store's tokenizer (STORE/tokenizer) with the run, so that export includes it."""
        source, target = self.store.root / "tokenizer", self.run_dir / "tokenizer"
        if target.is_dir() or not source.is_dir():
            return
        tokenizer = Tokenizer.from_pretrained(source)
        if tokenizer.fingerprint == self.store.info.get("tokenizer", {}).get("fingerprint"):
            tokenizer.save_pretrained(target)

    def _build_encoder(self) -> Encoder:
        cfg = self.config.model
        # Chosen once, here: every encoder the run builds from this one (the key encoder) keeps them.
        fast = FastPaths.training(single_process=not self.world.distributed) if self.config.run.fast_paths else FastPaths.plain()
        # The key encoder, built from this one, runs without gradients: nothing to recompute.
        checkpointing = self.config.run.activation_checkpointing
        if cfg.init:
            encoder = encoder_to_continue(cfg.init, fast, activation_checkpointing=checkpointing)
            if encoder.config.vocab_size != self.store.vocab_size:
                raise TrainingError(
                    f"--init {cfg.init}: vocabulary of {encoder.config.vocab_size} pieces, but the store "
                    f"{self.store.root} was tokenized with {self.store.vocab_size}; prepare it with that model's tokenizer"
                )
        else:
            config = EncoderConfig.preset(cfg.size, vocab_size=self.store.vocab_size, **cfg.overrides)
            encoder = Encoder(config, fast, activation_checkpointing=checkpointing)
            encoder.reset_parameters(cfg.init_scheme)
        encoder.set_dropout(cfg.dropout)
        encoder.pooler.requires_grad_(False)  # not trained by any objective; kept for checkpoints
        return encoder

    def _choose_max_tokens(self, first_step: int) -> None:
        """data.max_tokens left unset: 16,384 on a CPU; on a GPU the largest micro-batch budget
        whose estimated peak fits the memory left with the model in place (train/token_budget.py)."""
        tokens, message = resolve_max_tokens(
            self.config, self.world, self.model, self.pipeline, first_step,
            bf16=computes_in_bf16(self.config, self.world), sharded=is_sharded(self.model),
        )  # fmt: skip
        self.config.data = dataclasses.replace(self.config.data, max_tokens=tokens)
        self.pipeline = self.pipeline.with_max_tokens(tokens)
        if message and self.world.is_main:
            print(message, flush=True)

    def _build_contrast(self) -> MomentumContrast | None:
        if "xlco" not in self.config.data.enabled:
            return None
        c = self.config.contrast
        if not 1 <= c.layer <= self.encoder.num_layers:
            raise TrainingError(f"contrast.layer={c.layer}: the encoder has layers 1 … {self.encoder.num_layers}")
        try:
            return MomentumContrast.from_config(self.encoder, c)
        except ValueError as err:  # its messages start with the field: "pooling='max': …"
            raise TrainingError(f"contrast.{err}") from None

    def _resume(self, state: dict[str, Any], checkpoint: Path) -> None:
        try:
            if is_sharded_checkpoint(checkpoint):
                self._load_sharded(checkpoint)
            else:
                self._load_single_file(state, checkpoint)
            self.scheduler.load_state_dict(state["scheduler"])
        except CheckpointCorrupt:
            raise  # names the damaged file: not a matter of the config
        except (RuntimeError, KeyError, ValueError, TypeError) as err:  # a checkpoint the checks above did not foresee
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise TrainingError(f"{self.run_dir}: {checkpoint.name} does not fit the model of this config ({first})") from None
        self.step = int(state["step"])
        self._apply_optim_config()
        if self.world.is_main:
            print(f"resuming {self.run_dir} from {checkpoint.name} (step {self.step})", flush=True)

    def _load_sharded(self, checkpoint: Path) -> None:
        """Every rank reads the slices it holds (whole tensors under DDP, its shards under FSDP),
        whatever the number of processes that wrote the checkpoint."""
        from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

        state = self._tensor_state()
        load_sharded_into(checkpoint, state, self.world.distributed)
        set_model_state_dict(self.model, _joined(state))
        set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"])

    def _load_single_file(self, state: dict[str, Any], checkpoint: Path) -> None:
        if self.joint_step.sharded:
            raise TrainingError(
                f"{self.run_dir}: {checkpoint.name} is a single-file checkpoint (an earlier release's); "
                "continue it with run.parallelism=ddp until its next checkpoint, which is sharded"
            )
        self.encoder.load_state_dict(state["model"])
        if self.contrast is not None:
            self.contrast.load_state_dict(state["contrast"])
        self.optimizer.load_state_dict(state["optimizer"])

    def _apply_optim_config(self) -> None:
        """The optimizer's state dict brings back the hyperparameters it was saved with; the
        config's win (the same values unless --allow-config-change changed them)."""
        cfg = self.config.optim
        self.scheduler.base_lrs = [cfg.lr for _ in self.optimizer.param_groups]
        lrs = []
        for group in self.optimizer.param_groups:
            group.update(betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, initial_lr=cfg.lr)
            # What LambdaLR computes at this step: base_lr × multiplier.
            group["lr"] = cfg.lr * linear_warmup_decay(self.scheduler.last_epoch, cfg.warmup_steps, cfg.max_steps)
            lrs.append(group["lr"])
        self.scheduler._last_lr = lrs

    def _tensor_state(self) -> dict[str, Any]:
        """The run's tensors as this rank holds them (DTensors under FSDP), keyed by name:
        model (the encoder), contrast (key encoder, projections, queue) and optimizer (AdamW's
        state keyed by parameter name, so that it loads into any world size)."""
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

        state = _split(get_model_state_dict(self.model))
        state["optimizer"] = get_optimizer_state_dict(self.model, self.optimizer)
        return state

    def checkpoint_state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            **self._tensor_state(),
            "scheduler": self.scheduler.state_dict(),
            "encoder_config": json.dumps(dataclasses.asdict(self.encoder.config)),
            "config": self.config.to_json(),
            "store_identity": json.dumps(self.store_identity, sort_keys=True),
        }

    def save(self) -> None:
        """A checkpoint of this step; every rank writes its part (see checkpoint.py)."""
        state = self.checkpoint_state()
        self._stop_if_non_finite(state, "not saved")
        with interrupt.deferred():
            self.checkpoints.save(self.step, state)

    def _stop_if_non_finite(self, state: dict[str, Any], outcome: str) -> None:
        """A checkpoint or an export is a promise of good weights: never write non-finite ones.
        Every rank checks its part and all of them stop together."""
        then = f"{outcome}, stopping; {last_good_checkpoint(self.run_dir)}"
        refuse_non_finite(state, f"step {self.step}", then, self.world)

    def export_model(self, output: Path) -> Path:
        """The query encoder + MLM head (+ the run's tokenizer) as a Hugging Face directory with
        its model card, as `infoxlm export` writes it (``run.export_every``). Called on every
        rank; the main one writes."""
        weights = _split(whole_state(self.model))["model"]  # every rank: a collective under FSDP
        self._stop_if_non_finite(weights, f"{output} not exported")
        if not self.world.is_main:
            return output
        with atomic_dir(output, replace=True) as tmp:
            write_run_encoder(
                tmp, self.run_dir, self.encoder.config, weights, self.config.contrast.layer,
                loaded_parts=self.encoder.loaded_parts,
            )  # fmt: skip
            write_model_card(tmp, run_dir=self.run_dir, step=self.step, name=output.name)
        return output

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        cfg = self.config
        if self.world.is_main:  # the whole config is RUN/config.json; --print-config prints it
            print(self.summary(), flush=True)
            for line in self.notes:
                print(line, file=sys.stderr, flush=True)
            slow = estimate_step(cfg, self.shape, self.world, self.pipeline, self.step, self.contrast)
            if slow:  # before the queue fills and the first step runs: time to pick another preset
                print(slow, file=sys.stderr, flush=True)
        wandb = None
        if cfg.run.wandb and self.world.is_main:
            r = cfg.run
            wandb = WandbSink(self.run_dir, cfg.to_dict(), project=r.wandb_project, name=r.wandb_name, entity=r.wandb_entity)
        log = MetricsLog(self.run_dir, enabled=self.world.is_main, resume_step=self.step, wandb=wandb)
        bar = tqdm(total=cfg.optim.max_steps, initial=self.step, desc="pretrain", unit="step", disable=not self.progress)
        interrupted = False
        try:
            while self.step < cfg.optim.max_steps:
                interrupt.check()  # a Ctrl-C that library code swallowed
                metrics = self.train_step()
                self.step += 1
                self.checkpoints.poll()  # a background save that has finished goes in place
                bar.update(1)
                if self.step % cfg.run.log_every == 0 or self.step == cfg.optim.max_steps:
                    log.write(self.step, metrics)
                    bar.set_postfix_str(bar_postfix(metrics), refresh=False)
                    if self.world.is_main and not self.progress:  # no bar: a line instead
                        print(step_line(self.step, cfg.optim.max_steps, metrics), flush=True)
                if self.step % cfg.run.save_every == 0 or self.step == cfg.optim.max_steps:
                    self.save()
                if cfg.run.export_every and self.step % cfg.run.export_every == 0:
                    self.export_model(self.run_dir / "exports" / f"step-{self.step}")
                reason = self.stop.reached(self.step, self.world)
                if reason is not None and self.step < cfg.optim.max_steps:
                    self.stop_early(reason, saved=self.step % cfg.run.save_every == 0)
                    break
            self.checkpoints.wait()
        except KeyboardInterrupt:
            interrupted = True  # Ctrl-C: the last checkpoint stays; end within seconds
            raise
        except Exception as err:
            if not (self.world.distributed and is_collective_timeout(err)):
                raise
            raise TrainingError(
                f"step {self.step + 1}: rank {self.world.rank} waited run.collective_timeout_s="
                f"{cfg.run.collective_timeout_s} s for the other {self.world.size - 1} process(es) in a collective "
                f"operation: one of them stopped or hangs; {last_good_checkpoint(self.run_dir)}"
            ) from None
        finally:
            bar.close()
            log.close(timeout=1.0 if interrupted else TENSORBOARD_CLOSE_TIMEOUT_S)

    def summary(self) -> str:
        """What this run will do, in a few lines (console.py)."""
        lines = config_summary(
            self.config, run_dir=self.run_dir, preset=self.preset, encoder=self.encoder, store=self.store,
            device=self.world.device.type if self.world.distributed else str(self.world.device),
            processes=self.world.size, bf16=computes_in_bf16(self.config, self.world),
            start_step=self.step,
        )  # fmt: skip
        return "\n".join(lines)

    def stop_early(self, reason: str, saved: bool) -> None:
        """End the run after this step with its checkpoint in place, the config untouched."""
        if not saved:
            self.save()
        self.checkpoints.wait()
        barrier(self.world)  # the checkpoint is in place before any rank leaves
        self.stopped = reason
        if self.world.is_main:
            same = "the same command without --stop-at" if self.stop.stop_at is not None else "the same command"
            print(
                f"stopped after step {self.step} of {self.config.optim.max_steps} ({reason}); "
                f"{checkpoint_path(self.run_dir, self.step)} written; {same} continues the run",
                file=sys.stderr,
                flush=True,
            )

    def train_step(self, phases: "StepPhases | None" = None) -> dict[str, float]:
        """One optimizer step: data → ``JointStep`` (losses → backward → clip → step → EMA →
        enqueue) → metrics. ``phases`` (default: none) wraps each part, see ``StepPhases``."""
        phases = phases or NO_PHASES
        cfg, world, step = self.config, self.world, self.step
        started = time.perf_counter()
        torch.manual_seed(_mix(cfg.run.seed, step, world.rank))  # dropout: a function of (seed, step, rank)
        xlco_active = self.contrast is not None and step >= cfg.contrast.start_step
        if xlco_active and step == cfg.contrast.start_step and step > 0 and cfg.contrast.key_warmup == "copy":
            # The authors' warm-up: the key encoder, frozen until now, becomes a copy of the
            # query encoder just before XLCO starts (and before it fills the queue).
            self.contrast.momentum_update(self.encoder, momentum=0.0)
        if xlco_active and not self.contrast.is_full:
            self.prefill_queue()
        with phases("data"):
            data = self.pipeline.step(step, world.rank, world.size)
        result = self.joint_step(data, step, xlco_active, phases)

        seconds = time.perf_counter() - started
        device = world.device
        tokens = sum(s.num_tokens for s in data.stats.values())
        positions = sum(s.num_positions for s in data.stats.values())
        flops = self._useful_flops(data, xlco_active)
        totals = all_reduce_sum(torch.tensor([tokens, positions, flops], dtype=torch.float64, device=device), world)
        metrics = {"lr": result.lr, "grad_norm": result.grad_norm, "seconds": seconds}
        metrics.update(result.loss_metrics())
        if result.momentum is not None:
            metrics["momentum"] = result.momentum
        metrics["tokens_per_s"] = float(totals[0]) / seconds
        metrics["tokens_per_s_per_device"] = float(totals[0]) / seconds / world.size
        # Useful FLOPs (train/flops.py, as infoxlm bench counts them) per second and device; MFU
        # against the device's dense bf16 peak where it is known (GPUs computing in bf16).
        metrics["tflops_per_s_per_device"] = float(totals[2]) / seconds / world.size / 1e12
        if self.peak_flops:
            metrics["mfu"] = mfu(float(totals[2]) / world.size, seconds, self.peak_flops)
        metrics["padding_fraction"] = float(1 - totals[0] / totals[1]) if totals[1] else 0.0
        metrics["eta_s"] = seconds * (cfg.optim.max_steps - step - 1)
        return metrics

    def _useful_flops(self, data, xlco_active: bool) -> float:
        c = self.config.contrast
        if not xlco_active:
            data = dataclasses.replace(data, xlco=[])
        layer = c.layer if data.xlco else self.encoder.num_layers
        return step_data_flops(data, self.shape, layer, c.queue_size, c.pooling).total

    @torch.no_grad()
    def prefill_queue(self) -> None:
        """Fill the queue with keys of examples drawn for the purpose, before XLCO starts."""
        data_cfg = dataclasses.replace(
            self.config.data,
            seed=self.config.run.seed + PREFILL_SEED_OFFSET,
            mmlm_batch_size=0,
            tlm_batch_size=0,
        )
        pipeline = DataPipeline(self.store, data_cfg)
        needed = self.contrast.prefill_batches_needed(data_cfg.xlco_batch_size)
        for j in tqdm(range(needed), desc="filling the XLCO queue", unit="batch", disable=not self.progress):
            interrupt.check()
            keys, slots = [], []
            batches = even_out({"xlco": pipeline.step(j, self.world.rank, self.world.size).xlco}, self.world)
            for batch in batches["xlco"]:  # as many on every rank: FSDP gathers layer by layer
                out = self.ddp(keys_of=batch.to(self.world.device))
                keys.append(out.keys)
                slots.append(out.key_slots)
            empty = torch.zeros(0, self.encoder.config.hidden_size, device=self.world.device)
            self.joint_step.enqueue_in_slot_order(
                torch.cat(keys) if keys else empty,
                torch.cat(slots) if slots else torch.zeros(0, dtype=torch.long, device=self.world.device),
            )


# What a run reads from a sharded checkpoint before it builds the model (to check the resume).
RESUME_CHECK_KEYS = ("step", "config", "encoder_config", "store_identity", "scheduler")


def _split(joint_state: dict[str, Any]) -> dict[str, Any]:
    """JointModel's state dict → {"model": the encoder's, "contrast": the contrast's or None}:
    the layout of every infoxlm checkpoint (``infoxlm export`` reads "model")."""
    parts: dict[str, Any] = {"model": {}, "contrast": {}}
    for name, value in joint_state.items():
        part, _, rest = name.partition(".")
        parts["model" if part == "encoder" else "contrast"][rest] = value
    parts["contrast"] = parts["contrast"] or None
    return parts


def _joined(state: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``_split``: JointModel's state dict."""
    joined = {f"encoder.{k}": v for k, v in state["model"].items()}
    joined.update({f"contrast.{k}": v for k, v in (state["contrast"] or {}).items()})
    return joined


def _checkpoint_store_identity(state: dict[str, Any], run_dir: Path) -> dict[str, Any] | None:
    """The store identity a checkpoint was trained on (RUN/store_identity.json for checkpoints
    written before it was kept in them; None when neither has it)."""
    if "store_identity" in state:
        return json.loads(state["store_identity"])
    path = run_dir / STORE_IDENTITY_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise TrainingError(f"{path}: not valid JSON ({err}); it records the data the run was trained on") from None


def _mix(*values: int) -> int:
    """A 63-bit seed from several integers (the same on every platform and Python run)."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v + 0x632BE59BD9B4E019 + (h << 6) + (h >> 2))) & 0xFFFFFFFFFFFFFFFF
    return h & 0x7FFFFFFFFFFFFFFF


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


def pretrain(config: TrainConfig, data: str | Path, output: str | Path, *, stop_at: int | None = None, **kwargs) -> Path:
    """Train (or resume) a run to its last step; returns the run directory.

    ``stop_at``: end after that step with a checkpoint (as SIGTERM / SIGUSR1 do at any step),
    leaving the config as it is, so that the same call without it continues the run.

    Raises:
        RunStopped: the run ended before its last step (``stop_at``, or a stop signal), with
            its checkpoint in place, or was already at ``stop_at`` or past it (then nothing is
            done). Its weights are not the finished model's: callers export or evaluate only
            what returns normally. The ``infoxlm`` commands exit 0 on it.
        TrainingError: the run cannot start or continue (another command is running in
            ``output``, a config or data clash, non-finite values), said in one line.
    """
    with interrupt.latched(), StopRequest(stop_at) as stop:
        return _pretrain(config, data, output, stop, **kwargs)


def _pretrain(config: TrainConfig, data: str | Path, output: str | Path, stop: StopRequest, **kwargs) -> Path:
    interrupt.check()  # a Ctrl-C during start-up that an import swallowed
    _refuse_stop_at_behind(Path(output), stop.stop_at, config.optim.max_steps)
    trainer = Trainer(config, data, output, **kwargs)
    trainer.stop = stop
    try:
        trainer.run()
        # No rank tears the process group down while another (rank 0 writing the last
        # checkpoint) may still be using it, and every rank returns with the run complete.
        barrier(trainer.world)
    finally:
        trainer.close()
    if trainer.stopped is not None:
        raise RunStopped(trainer.run_dir, trainer.step, trainer.config.optim.max_steps, trainer.stopped)
    return trainer.run_dir


def _refuse_stop_at_behind(run_dir: Path, stop_at: int | None, max_steps: int) -> None:
    """A ``--stop-at`` the run has reached already: do nothing (not even one more step), so
    that a job re-submitted with the same ``--stop-at`` does not advance the run each time.
    Every rank reads the same checkpoints; rank 0 (torchrun's RANK) says so."""
    found = list_checkpoints(run_dir)
    step = found[-1][0] if found else 0
    if stop_at is None or step < stop_at or step >= max_steps:  # a finished run stays finished
        return
    reason = f"already at step {step}, at or past --stop-at {stop_at}: nothing to do"
    if os.environ.get("RANK", "0") == "0":
        same = "the same command without --stop-at continues the run"
        print(f"{run_dir}: {reason} (step {step} of {max_steps}); {same}", file=sys.stderr, flush=True)
    raise RunStopped(run_dir, step, max_steps, reason)


def encoder_to_continue(
    init: str | Path, fast_paths: FastPaths = FastPaths(), *, activation_checkpointing: bool = False
) -> Encoder:
    """``model.init``: a Hugging Face XLM-R directory, a sentence-transformers export (its
    Transformer module's weights) or a run directory (the weights of its latest checkpoint, as
    `infoxlm export` writes them, without its optimizer state); see model_source.py. Built with
    ``fast_paths`` and ``activation_checkpointing`` (see ``Encoder``)."""
    with open_model(init, flag="--init") as model:
        return Encoder.from_pretrained(
            model.directory, fast_paths=fast_paths, activation_checkpointing=activation_checkpointing
        )
