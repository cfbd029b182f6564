"""When a run writes a checkpoint: every ``run.save_every`` steps, every
``run.save_every_minutes`` of wall time, and after the last step.

Steps alone are no bound on what a stop can lose: a preset's ``save_every`` fits its usual
length, and one run with ``--max-steps`` below it, or on a slower device, would write nothing
before its end. The clock bounds the loss to a few minutes whatever the preset and the device.
A checkpoint written for the clock is the same as any other (the state after a step): a run
resumed from it continues exactly.

In a run of several processes the ranks' clocks differ and every rank writes its part of a
checkpoint, so the ranks agree (one MAX all-reduce of a single number per step) and all save
after the same step.

    >>> from infoxlm.train.distributed import World
    >>> schedule = SaveSchedule(save_every=5, minutes=0, max_steps=12)
    >>> [step for step in range(1, 13) if schedule.due(step, World())]
    [5, 10, 12]
"""

from __future__ import annotations

import time

import torch

from .distributed import World, all_reduce_max

__all__ = ["SaveSchedule"]


class SaveSchedule:
    """Whether to save after a step.

    Args:
        save_every: steps between checkpoints (``run.save_every``).
        minutes: wall-clock minutes since the last checkpoint (or the start) after which the
            next step saves (``run.save_every_minutes``); 0 turns the clock off.
        max_steps: the last step, always saved.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(self, save_every: int, minutes: float, max_steps: int, clock=time.monotonic):
        self.save_every, self.seconds, self.max_steps, self.clock = save_every, minutes * 60.0, max_steps, clock
        self.last = clock()  # the start counts as a save: nothing to lose yet

    def due(self, step: int, world: World) -> bool:
        """After optimizer step ``step`` (counted from 1); every rank gets the same answer."""
        by_clock = self.seconds > 0 and self.clock() - self.last >= self.seconds
        if world.distributed and self.seconds > 0:
            flag = torch.tensor([1.0 if by_clock else 0.0], device=world.device)
            by_clock = bool(all_reduce_max(flag, world).item())
        return by_clock or step % self.save_every == 0 or step == self.max_steps

    def saved(self) -> None:
        """A checkpoint was written now: the clock starts again."""
        self.last = self.clock()
