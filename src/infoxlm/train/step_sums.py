"""A step's summed losses: accumulated on the device as the micro-steps come, read once.

Reading a loss on the host would make it wait for the micro-step's kernels, so every
objective's summed loss (and its extras, e.g. XLCO's queries ranked first) is added up in
float64 on the device and read once a step, after one all-reduce over the ranks; the step's
mean loss per objective is that sum over its count (``Objective.count``, all ranks).
"""

from __future__ import annotations

import dataclasses

import torch

from ..objectives.objective import Objective
from .distributed import World, all_reduce_sum
from .joint_model import MicroStepLosses

__all__ = ["SumsOnDevice", "StepResult", "StepSums"]


@dataclasses.dataclass
class StepSums:
    """A step's summed losses per objective and their extras (name → extra → sum), over all
    micro-steps (and, once all-reduced, all ranks)."""

    losses: dict[str, float]
    extras: dict[str, dict[str, float]]

    def means(self, counts: dict[str, int]) -> dict[str, float]:
        """Mean loss per objective present in the step (``counts``: its normalisers)."""
        return {name: total / counts[name] for name, total in self.losses.items() if counts[name] > 0}


class SumsOnDevice:
    """``StepSums`` of these objectives, accumulated on the device in float64."""

    def __init__(self, objectives: list[Objective], device: torch.device):
        self.names = [o.name for o in objectives]
        self.extra_names = {o.name: list(o.extras) for o in objectives}
        fields = [*self.names, *(f"{n}/{e}" for n, extras in self.extra_names.items() for e in extras)]
        self.values = {name: torch.zeros((), dtype=torch.float64, device=device) for name in fields}

    def add(self, out: MicroStepLosses) -> None:
        for name, term in out.items():
            if name not in self.extra_names:  # the touch ("")
                continue
            self.values[name] += term.loss_sum.detach().double()
            for extra, value in term.extras.items():
                self.values[f"{name}/{extra}"] += value

    def all_reduced(self, world: World) -> torch.Tensor:
        """(fields,) float64 on the device: every rank's sums, losses then extras."""
        return all_reduce_sum(torch.stack(list(self.values.values())), world)

    def to_sums(self, values: list[float]) -> StepSums:
        """The host values of ``all_reduced``, as ``StepSums``."""
        named = dict(zip(self.values, values))
        return StepSums(
            {name: named[name] for name in self.names},
            {name: {e: named[f"{name}/{e}"] for e in extras} for name, extras in self.extra_names.items()},
        )

    def read(self, world: World) -> StepSums:
        """Every rank's sums on the host (waits for the device)."""
        return self.to_sums(self.all_reduced(world).tolist())


@dataclasses.dataclass
class StepResult:
    """What one JointStep call leaves for the metrics."""

    sums: StepSums  # all ranks
    counts: dict[str, int]  # the loss normalisers (all ranks)
    grad_norm: float
    lr: float
    objective_metrics: dict[str, float]  # the objectives' own (XLCO's accuracy, its momentum)

    def loss_metrics(self) -> dict[str, float]:
        """``loss/NAME`` of every objective present in the step, then the objectives' own."""
        return {**{f"loss/{name}": mean for name, mean in self.sums.means(self.counts).items()}, **self.objective_metrics}
