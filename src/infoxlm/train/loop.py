"""``infoxlm pretrain``: the run around the joint step (joint_step.py): check and create the
run directory, build the model (model_build.py) or resume it (resume.py), then for each step:
data → the joint step → log → save, until the last step, ``--stop-at`` or a scheduler's
signal.

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
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import torch
from tqdm.auto import tqdm

from .. import interrupt
from ..data.pipeline import DataPipeline
from ..data.store import TokenStore
from ..export.model_card import DATA_SUMMARY_NAME, data_summary, write_model_card
from ..objectives.objective import StepAbandoned
from ..outputs import atomic_dir, check_output_dir, is_run_directory, write_text_atomically
from ..tokenizer import Tokenizer
from .checkpoint import CheckpointWriter, checkpoint_path, last_good_checkpoint, list_checkpoints, refuse_non_finite
from .config import TrainConfig, resolve_config
from .console import bar_postfix, config_summary, step_line
from .device_memory import allocator_counts
from .distributed import (
    World,
    barrier,
    init_world,
    is_collective_timeout,
    keep_until_exit,
    shutdown,
    sum_over_ranks,
)
from .errors import NonFiniteStep, TrainingError
from .export import write_run_encoder
from .flops import ModelShape, run_peak_flops, throughput_metrics, trained_flops
from .joint_step import NO_PHASES, StepPhases, build_joint_step, computes_in_bf16
from .metrics import TENSORBOARD_CLOSE_TIMEOUT_S, MetricsLog, WandbSink
from .model_build import build_model, check_init_tokenizer
from .parallelism import is_sharded, whole_state
from .resume import STORE_IDENTITY_FILE, Resume, split_state, tensor_state
from .run_lock import RunLock
from .save_schedule import SaveSchedule
from .stopping import RunStopped, StopRequest
from .step_estimate import estimate_step
from .step_prefetch import StepPrefetcher
from .store_identity import store_identity
from .token_budget import resolve_max_tokens
from .validation import Validation


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
        validation: str | Path | None = None,
        stop: StopRequest | None = None,
    ):
        # pretrain() hands in its own (--stop-at, SIGTERM / SIGUSR1, Ctrl-C); none: never asked.
        self.stop = stop if stop is not None else StopRequest()
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
            self._start(config, data, allow_config_change, allow_data_change, progress, validation)
        except BaseException:
            self.run_lock.release(started=False)  # a command that cannot start leaves RUN as it was
            raise

    def _start(
        self, config: TrainConfig, data: str | Path, allow_config_change: bool, allow_data_change: bool, progress: bool,
        validation: str | Path | None,
    ) -> None:
        # The seed of the data, and what is left to the device (compiling on a GPU).
        self.config = resolve_config(self.config, self.world.device)
        self.progress = progress and self.world.is_main
        self.store = TokenStore.open(data)
        self.store_identity = store_identity(self.store)
        # The newest intact checkpoint, checked against the config and the store before the
        # model is built; its tensors are loaded once it is.
        resume = Resume.find(self.run_dir, self.world)
        if resume is not None:
            resume.check(
                self.config, self.store.root, self.store_identity,
                allow_config_change=allow_config_change, allow_data_change=allow_data_change, warn=self.world.is_main,
            )  # fmt: skip
        elif config.model.init:
            fingerprint = self.store_identity["tokenizer"]["fingerprint"]
            check_init_tokenizer(config.model.init, self.store.root, fingerprint, warn=self.world.is_main)
        self.pipeline = DataPipeline(self.store, self.config.data)
        # --validation: held-out losses and retrieval every run.eval_every steps (validation.py)
        self.validation = Validation(validation, self.config, self.store) if validation is not None else None

        torch.manual_seed(config.run.seed)  # the fresh weights
        model = build_model(
            self.config, self.store.vocab_size, distributed=self.world.distributed, store_root=self.store.root,
            check_encoder=resume.check_encoder if resume is not None else None,
        )  # fmt: skip
        self.encoder = model.encoder
        self.joint_step = step = build_joint_step(
            self.config, self.world, model, store=self.store, progress=self.progress,
            stop_requested=partial(_stop_signalled, self.stop, self.world),
        )  # fmt: skip
        self.model, self.parallel_model, self.optimizer, self.scheduler = step.model, step.parallel_model, step.optimizer, step.scheduler
        r = self.config.run
        self.checkpoints = CheckpointWriter(
            self.run_dir, self.world.rank, self.world.distributed, keep=r.keep_checkpoints, asynchronous=r.async_checkpoint,
            timeout=timedelta(seconds=r.collective_timeout_s),
        )  # fmt: skip
        self.shape = ModelShape.of(self.encoder.config)
        self.peak_flops = run_peak_flops(self.world.device, computes_in_bf16(self.config, self.world))  # MFU's denominator
        self.step = 0
        self.stopped: str | None = None  # why the run stopped before its last step, once it has
        # Before the resume loads AdamW's state: the estimate counts it as still to come.
        self._choose_max_tokens(first_step=resume.step if resume is not None else 0)
        self.data = StepPrefetcher(
            self.pipeline, self.world, last_step=self.config.optim.max_steps, enabled=self.config.run.prefetch_data
        )
        if resume is not None:
            resume.load_into(self.joint_step, self.config)
            self.step = resume.step
            if self.world.is_main:
                print(f"resuming {self.run_dir} from {resume.checkpoint.name} (step {self.step})", flush=True)
        self._write_run_directory()  # only now: a run that cannot start leaves nothing changed

    def close(self) -> None:
        """Leave the process group and the run directory to the next command."""
        self.data.close()
        if self.world.distributed:
            keep_until_exit(self.parallel_model)
        shutdown(self.world)
        self.run_lock.release()

    # --- set-up ---------------------------------------------------------------------------

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
            write_text_atomically(self.run_dir / name, text + "\n")
        self._copy_tokenizer()

    def _copy_tokenizer(self) -> None:
        """Keep the store's tokenizer (STORE/tokenizer) with the run, so that export includes it."""
        source, target = self.store.root / "tokenizer", self.run_dir / "tokenizer"
        if target.is_dir() or not source.is_dir():
            return
        tokenizer = Tokenizer.from_pretrained(source)
        if tokenizer.fingerprint == self.store.info.get("tokenizer", {}).get("fingerprint"):
            with atomic_dir(target) as tmp:  # a partial copy would be taken for the run's tokenizer
                tokenizer.save_pretrained(tmp)

    def _choose_max_tokens(self, first_step: int) -> None:
        """data.max_tokens left unset: 16,384 on a CPU where it fits its memory; on a GPU the largest micro-batch budget
        whose estimated peak fits the memory left with the model in place (train/token_budget.py)."""
        tokens, message = resolve_max_tokens(
            self.config, self.world, self.model, self.pipeline, first_step,
            bf16=computes_in_bf16(self.config, self.world), sharded=is_sharded(self.model),
        )  # fmt: skip
        self.pipeline = self.pipeline.with_max_tokens(tokens)  # the store is not read again
        self.config.data = self.pipeline.config  # one data config: the pipeline's, saved with the run
        if message and self.world.is_main:
            print(message, flush=True)

    def checkpoint_state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            **tensor_state(self.model, self.optimizer),
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
        weights = split_state(whole_state(self.model))["model"]  # every rank: a collective under FSDP
        self._stop_if_non_finite(weights, f"{output} not exported")
        if not self.world.is_main:
            return output
        with atomic_dir(output, replace=True) as tmp:
            write_run_encoder(
                tmp, self.run_dir, self.encoder.config, weights, self.config.to_dict(), loaded_parts=self.encoder.loaded_parts
            )
            write_model_card(tmp, run_dir=self.run_dir, step=self.step, name=output.name)
        return output

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        cfg = self.config
        if self.world.is_main:  # the whole config is RUN/config.json; --print-config prints it
            print(self.summary(), flush=True)
            for line in self.notes:
                print(line, file=sys.stderr, flush=True)
            slow = estimate_step(cfg, self.shape, self.world, self.pipeline, self.step, self.model.objectives)
            if slow:  # before the queue fills and the first step runs: time to pick another preset
                print(slow, file=sys.stderr, flush=True)
        wandb = None
        if cfg.run.wandb and self.world.is_main:
            r = cfg.run
            wandb = WandbSink(self.run_dir, cfg.to_dict(), project=r.wandb_project, name=r.wandb_name, entity=r.wandb_entity)
        log = MetricsLog(self.run_dir, enabled=self.world.is_main, resume_step=self.step, wandb=wandb)
        bar = tqdm(total=cfg.optim.max_steps, initial=self.step, desc="pretrain", unit="step", disable=not self.progress)
        interrupted = False
        saves = SaveSchedule(cfg.run.save_every, cfg.run.save_every_minutes, cfg.optim.max_steps)
        try:
            with self.stop.ctrl_c():  # the first Ctrl-C from here on stops as SIGTERM does
                self._steps(log, bar, saves)
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
            self.checkpoints.close()  # a background save still running after an error ends complete or removed
            log.close(timeout=1.0 if interrupted else TENSORBOARD_CLOSE_TIMEOUT_S)

    def _steps(self, log: MetricsLog, bar: tqdm, saves: SaveSchedule) -> None:
        """Step → log → save → export, until the last step or a stop."""
        cfg = self.config
        while self.step < cfg.optim.max_steps:
            interrupt.check()  # a Ctrl-C that library code swallowed
            try:
                metrics = self.train_step()
            except StepAbandoned as err:  # a stop during long work before the update
                self.stop_before_step(f"{self.stop.by_signal(self.world)}, {err}")
                return
            interrupt.check()  # a second Ctrl-C that library code swallowed during the step: no save
            self.step += 1
            self.checkpoints.poll()  # a background save that has finished goes in place
            bar.update(1)
            validated = self.validation is not None and self.validation.due(self.step, cfg.optim.max_steps)
            if validated:  # the model after this step, on the held-out data
                metrics.update(self.validation.scores(self.model, self.world))
            if validated or self.step % cfg.run.log_every == 0 or self.step == cfg.optim.max_steps:
                metrics.update(allocator_counts(self.world.device))
                log.write(self.step, metrics)
                bar.set_postfix_str(bar_postfix(metrics), refresh=False)
                if self.world.is_main and (validated or not self.progress):  # no bar, or validation: a line
                    line = step_line(self.step, cfg.optim.max_steps, metrics)
                    if self.progress:
                        bar.write(line)  # above the bar, which stays
                    else:
                        print(line, flush=True)
            saved = saves.due(self.step, self.world)
            if saved:
                self.save()
                saves.saved()
            if cfg.run.export_every and self.step % cfg.run.export_every == 0:
                self.export_model(self.run_dir / "exports" / f"step-{self.step}")
            reason = self.stop.reached(self.step, self.world)
            if reason is not None and self.step < cfg.optim.max_steps:
                self.stop_early(reason, saved=saved)
                return

    def summary(self) -> str:
        """What this run will do, in a few lines (console.py)."""
        lines = config_summary(
            self.config, run_dir=self.run_dir, preset=self.preset, encoder=self.encoder, store=self.store,
            device=self.world.device.type if self.world.distributed else str(self.world.device),
            processes=self.world.size, bf16=computes_in_bf16(self.config, self.world),
            start_step=self.step,
        )  # fmt: skip
        if self.validation is not None:
            lines.insert(-1, self.validation.describe())
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
            # tqdm.write: on a line of its own, the progress bar cleared first and drawn again below.
            tqdm.write(
                f"stopped after step {self.step} of {self.config.optim.max_steps} ({reason}); "
                f"{checkpoint_path(self.run_dir, self.step)} written; {same} continues the run",
                file=sys.stderr,
            )

    def stop_before_step(self, reason: str) -> None:
        """End the run before step ``self.step + 1``, which did not run: the last checkpoint
        (if any) stays as it is, and the same command continues from it."""
        self.stopped = reason
        if self.world.is_main:
            found = list_checkpoints(self.run_dir)
            kept = f"{found[-1][1]} stays" if found else "no step had run, so nothing was saved"
            tqdm.write(f"stopped before step {self.step + 1} of {self.config.optim.max_steps} ({reason}); {kept}; "
                       "the same command continues the run", file=sys.stderr)  # fmt: skip

    def train_step(self, phases: "StepPhases | None" = None) -> dict[str, float]:
        """One optimizer step: seed → data → ``JointStep`` (the objectives' hooks, losses,
        backward, clip, update) → metrics. ``phases`` (default: none) wraps each part, see
        ``StepPhases``."""
        phases = phases or NO_PHASES
        cfg, world, step = self.config, self.world, self.step
        started = time.perf_counter()
        torch.manual_seed(_mix(cfg.run.seed, step, world.rank))  # dropout: a function of (seed, step, rank)
        with phases("data"):
            data = self.data.step(step)  # built in the background during the last step (step_prefetch.py)
        try:
            result = self.joint_step(data, step, phases)
        except NonFiniteStep as err:  # said with where to resume from
            raise TrainingError(f"{err}; {last_good_checkpoint(self.run_dir)}") from None

        seconds = time.perf_counter() - started
        tokens = sum(s.num_tokens for s in data.stats.values())
        positions = sum(s.num_positions for s in data.stats.values())
        flops = trained_flops(data, self.shape, self.model.objectives, step)
        totals = sum_over_ranks([tokens, positions, flops], world)
        metrics = {"lr": result.lr, "grad_norm": result.grad_norm, "seconds": seconds}
        metrics.update(result.loss_metrics())
        metrics.update(throughput_metrics(*totals, seconds=seconds, devices=world.size, peak_flops=self.peak_flops))
        metrics["eta_s"] = seconds * (cfg.optim.max_steps - step - 1)
        return metrics


def _stop_signalled(stop: StopRequest, world: World) -> bool:
    """Whether a stop signal arrived on any rank (what an objective's long work reads)."""
    return stop.by_signal(world) is not None


def _mix(*values: int) -> int:
    """A 63-bit seed from several integers (the same on every platform and Python run)."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v + 0x632BE59BD9B4E019 + (h << 6) + (h >> 2))) & 0xFFFFFFFFFFFFFFFF
    return h & 0x7FFFFFFFFFFFFFFF


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
    trainer = Trainer(config, data, output, stop=stop, **kwargs)
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
