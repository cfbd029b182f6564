"""The fine-tuning loop XNLI and MLQA share: AdamW, linear warm-up then decay, periodic
evaluation and best-checkpoint selection.

The step is flat and visible: batch → loss → backward → clip → step → schedule, with an
evaluation every ``eval_every`` optimizer steps and at the end of every epoch. The paper
(appendix, "Hyperparameters for Fine-Tuning") evaluates XNLI every 5,000 steps and keeps the
model with the best accuracy on the joint validation set of all languages (#M=1: one model
for every language); MLQA uses the final model. Both are ``selection`` modes here.

Data order is a function of (seed, epoch) only, and the head's initialisation of the seed, so
a run is repeatable on one device. Example::

    >>> cfg = FinetuneConfig(lr=1e-5, batch_size=32, epochs=10, warmup="12500")   # XNLI, base
    >>> cfg.warmup_steps(total_steps=100_000)
    12500
    >>> FinetuneConfig(lr=3e-5, batch_size=32, epochs=3, warmup="10%").warmup_steps(1000)
    100
"""

from __future__ import annotations

import copy
import math
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..errors import InfoXLMError
from ..train.optim import build_optimizer, build_scheduler, warmup_unreached

SELECTIONS = ("best", "last")


class FinetuneError(InfoXLMError):
    """A fine-tuning option or input that cannot be used."""


@dataclass
class FinetuneConfig:
    """Optimisation settings of one fine-tuning run (the paper's appendix tables name them)."""

    lr: float
    batch_size: int
    epochs: float
    warmup: str = "0"  # optimizer steps ("12500") or a share of all steps ("10%")
    weight_decay: float = 0.0  # the appendix: 0 for base models on both tasks
    # Not stated in the paper: the Adam settings and clipping of the XTREME / Hugging Face
    # fine-tuning scripts the paper's protocol follows (betas (0.9, 0.999), eps 1e-8, clip 1.0).
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    max_grad_norm: float = 1.0
    eval_every: int | None = None  # optimizer steps between evaluations (plus each epoch end)
    selection: str = "best"  # "best": best evaluation score; "last": the final weights
    seed: int = 0
    max_steps: int | None = None  # stop early (tests, smoke runs); the schedule still spans the epochs

    def __post_init__(self) -> None:
        checks = [
            (self.lr > 0, f"learning rate {self.lr}: expected > 0"),
            (self.batch_size >= 1, f"batch size {self.batch_size}: expected >= 1"),
            (self.epochs > 0, f"epochs {self.epochs}: expected > 0"),
            (self.weight_decay >= 0, f"weight decay {self.weight_decay}: expected >= 0"),
            (self.eval_every is None or self.eval_every >= 1, f"eval every {self.eval_every}: expected >= 1 step"),
            (self.selection in SELECTIONS, f"selection {self.selection!r}: expected one of {', '.join(SELECTIONS)}"),
            (self.max_steps is None or self.max_steps >= 1, f"max steps {self.max_steps}: expected >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise FinetuneError(message)
        self.warmup_steps(1)  # validates the spelling now, not after loading a model

    def warmup_steps(self, total_steps: int) -> int:
        text = str(self.warmup).strip()
        try:
            if text.endswith("%"):
                share = float(text[:-1]) / 100
                if not 0 <= share <= 1:
                    raise ValueError
                return int(share * total_steps)
            steps = int(text)
            if steps < 0:
                raise ValueError
            return steps
        except ValueError:
            raise FinetuneError(f"warmup {self.warmup!r}: expected a step count (12500) or a percentage (10%)") from None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Evaluation:
    """One evaluation during training: the selection score and whatever details the task adds."""

    step: int
    epoch: float
    score: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainingResult:
    """What :func:`train` returns; the model itself holds the selected weights afterwards."""

    losses: list[float]  # training loss of every optimizer step
    evaluations: list[Evaluation]
    selected_step: int
    selected: Evaluation | None  # the evaluation of the selected weights (None without evaluation)
    total_steps: int
    warmup_steps: int
    best_state: dict[str, torch.Tensor]  # the selected weights, on the CPU

    def loss_summary(self) -> dict[str, Any]:
        """The training loss as results.json records it: first, last, steps, and every step's
        value for runs of at most 1000 steps."""
        losses = self.losses
        return {"first": losses[0], "last": losses[-1], "steps": len(losses),
                "per_step": losses if len(losses) <= 1000 else None}


def seed_everything(seed: int) -> None:
    """Python, NumPy and torch (all devices) from one seed: head init, dropout, data order."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """A permutation of range(n) that depends on (seed, epoch) only."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(n, generator=g).tolist()


def move(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def train(
    model: torch.nn.Module,
    features: Sequence[Any],
    collate: Callable[[list[Any]], dict[str, torch.Tensor]],
    loss_of: Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor],
    config: FinetuneConfig,
    *,
    evaluate: Callable[[torch.nn.Module], Evaluation] | None = None,
    device: torch.device | str = "cpu",
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> TrainingResult:
    """Fine-tune ``model`` on ``features`` and leave the selected weights in it.

    Args:
        features: training items (task-specific; e.g. token ids + label); batched by ``collate``
            into a dict of tensors (B, …) and scored by ``loss_of(model, batch)`` → scalar loss.
        evaluate: called in eval mode every ``config.eval_every`` steps and at each epoch end;
            returns an :class:`Evaluation` whose ``score`` (higher is better) selects the
            checkpoint when ``config.selection == "best"``. Its ``step``/``epoch`` are filled in here.
    """
    device = torch.device(device)
    if not features:
        raise FinetuneError("no training examples")
    if config.selection == "best" and evaluate is None:
        raise FinetuneError("selection 'best' needs evaluation data (e.g. a dev set)")
    model.to(device).train()
    params = model.trainable_parameters() if hasattr(model, "trainable_parameters") else model.parameters()
    params = list(params)
    optimizer = build_optimizer(
        params, lr=config.lr, betas=config.betas, eps=config.eps, weight_decay=config.weight_decay
    )
    plan = _StepPlan.of(len(features), config, log)
    scheduler = build_scheduler(optimizer, plan.warmup_steps, plan.total_steps)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    selection = _Selection(model, evaluate, config, plan.steps_per_epoch, log)

    losses: list[float] = []
    step, epoch = 0, 0
    bar = tqdm(total=plan.run_steps, desc="fine-tuning", unit="step", disable=not progress)
    while step < plan.run_steps:
        order = epoch_order(len(features), config.seed, epoch)
        for start in range(0, len(order), config.batch_size):
            batch = move(collate([features[i] for i in order[start:start + config.batch_size]]), device)
            with autocast:
                loss = loss_of(model, batch)
            if not torch.isfinite(loss):
                raise FinetuneError(f"non-finite training loss {loss.item()} at step {step}; lower the learning rate")
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            losses.append(loss.item())
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
            if config.eval_every and step % config.eval_every == 0:
                selection.evaluate(step)
            if step >= plan.run_steps:
                break
        epoch += 1
        selection.evaluate(step)  # the end of an epoch (or of a run cut short by max_steps)
    bar.close()

    selected_step, selected, state = selection.keep(step)
    return TrainingResult(
        losses, selection.evaluations, selected_step, selected, plan.total_steps, plan.warmup_steps, state
    )


@dataclass(frozen=True)
class _StepPlan:
    """How many optimizer steps a run has: per epoch, in the schedule, warm-up, and to run."""

    steps_per_epoch: int
    total_steps: int  # what the learning-rate schedule spans: every epoch
    warmup_steps: int
    run_steps: int  # what is run: total_steps, or fewer with max_steps

    @classmethod
    def of(cls, n_features: int, config: FinetuneConfig, log: Callable[[str], None]) -> _StepPlan:
        steps_per_epoch = math.ceil(n_features / config.batch_size)
        total_steps = max(1, math.ceil(steps_per_epoch * config.epochs))
        warmup = config.warmup_steps(total_steps)
        unreached = warmup_unreached(warmup, total_steps)
        if unreached:
            log(f"[finetune] {unreached}")
        return cls(steps_per_epoch, total_steps, warmup, min(total_steps, config.max_steps or total_steps))


class _Selection:
    """The evaluations of one run and the weights they select: the best-scoring snapshot
    (``selection="best"``) or the final weights (``"last"``, or when nothing was evaluated)."""

    def __init__(
        self,
        model: torch.nn.Module,
        evaluate: Callable[[torch.nn.Module], Evaluation] | None,
        config: FinetuneConfig,
        steps_per_epoch: int,
        log: Callable[[str], None],
    ):
        self.model, self._evaluate, self.config = model, evaluate, config
        self.steps_per_epoch, self.log = steps_per_epoch, log
        self.evaluations: list[Evaluation] = []
        self.best: Evaluation | None = None
        self.best_state: dict[str, torch.Tensor] | None = None
        self.best_step = 0

    def evaluate(self, step: int) -> None:
        """Evaluate after ``step`` (once per step) and snapshot the weights if they score best."""
        if self._evaluate is None or (self.evaluations and self.evaluations[-1].step == step):
            return
        self.model.eval()
        with torch.no_grad():
            result = self._evaluate(self.model)
        self.model.train()
        result.step, result.epoch = step, step / self.steps_per_epoch
        self.evaluations.append(result)
        self.log(f"[finetune] step {step} (epoch {result.epoch:.2f}): dev score {result.score:.2f}")
        if self.config.selection == "best" and (self.best is None or result.score > self.best.score):
            self.best, self.best_step = result, step
            self.best_state = _snapshot(self.model)

    def keep(self, step: int) -> tuple[int, Evaluation | None, dict[str, torch.Tensor]]:
        """Leave the selected weights in the model after the last ``step``; (their step, their
        evaluation, a CPU copy of them)."""
        if self.config.selection == "last" or self.best_state is None:
            last = self.evaluations[-1] if self.evaluations and self.evaluations[-1].step == step else None
            return step, last, _snapshot(self.model)
        self.model.load_state_dict(self.best_state, strict=False)  # the snapshot leaves out unused parts
        return self.best_step, self.best, self.best_state


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A CPU copy of the weights worth keeping (task models leave out the MLM head: with XLM-R's
    250k vocabulary its tied decoder alone would double the copy)."""
    if hasattr(model, "task_state_dict"):
        return {k: v.clone() for k, v in model.task_state_dict().items()}
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def copy_config(config: FinetuneConfig, **changes: Any) -> FinetuneConfig:
    """``config`` with some fields replaced (e.g. the seed of the next run)."""
    new = copy.copy(config)
    for key, value in changes.items():
        setattr(new, key, value)
    return new
