"""Ending a run early and cleanly: ``--stop-at STEP``, Ctrl-C, and a scheduler's SIGTERM / SIGUSR1.

A cluster scheduler warns a job before it takes its nodes away: SLURM sends SIGTERM at the
time limit (and, with ``--signal=USR1@120``, SIGUSR1 a chosen time before), and torchrun
passes SIGTERM on to its workers. A run that receives one of them finishes the step it is in,
writes a checkpoint and exits 0, so that the job's next start (the same command, or
``torchrun --max-restarts``) continues from there; ``--stop-at STEP`` does the same after a
given step, without touching the run's config.

``pretrain()`` then raises :class:`RunStopped` rather than return as a finished run does, so
that no caller (``infoxlm demo``, a script) goes on to export or evaluate a partly trained
model; the ``infoxlm`` commands exit 0 on it.

Ctrl-C (SIGINT) while the steps run is the keyboard's SIGTERM: the first one stops the run
after the step in progress with a checkpoint, exit 0; a second one, when waiting is not
wanted, aborts at once (a KeyboardInterrupt, as before the steps began: exit 130), the last
checkpoint kept. A SIGINT that the shell ignores (a background job) stays ignored.

The handler only sets a flag; the trainer asks :meth:`StopRequest.reached` at each step
boundary. In a run of several processes the signal may reach the ranks a step apart, so the
ranks agree (one MAX all-reduce of a single number per step) and all stop after the same step.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

import torch

from .. import interrupt
from .distributed import World, all_reduce_max

__all__ = ["RunStopped", "StopRequest", "STOP_SIGNALS"]

# SIGUSR1 does not exist on Windows; SIGTERM does.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name))


class RunStopped(Exception):
    """A run ended before its last step, its checkpoint of ``step`` in place: the same call
    (without ``stop_at``) continues it. Not an error; raised so that a stopped run is never
    taken for a finished one.

    Attributes: ``run_dir``, ``step`` (the run's step now), ``max_steps``, ``reason`` (e.g.
    "SIGTERM received", "--stop-at 4 reached").
    """

    def __init__(self, run_dir: Path, step: int, max_steps: int, reason: str):
        super().__init__(f"{run_dir}: stopped at step {step} of {max_steps} ({reason})")
        self.run_dir, self.step, self.max_steps, self.reason = Path(run_dir), step, max_steps, reason


class StopRequest:
    """A context manager that turns SIGTERM / SIGUSR1 into a stop after the current step.

    Args:
        stop_at: the last step to run (``--stop-at``), or None.
    """

    def __init__(self, stop_at: int | None = None):
        if stop_at is not None and (isinstance(stop_at, bool) or not isinstance(stop_at, int) or stop_at < 1):
            raise ValueError(f"stop_at must be an integer >= 1, got {stop_at!r}")
        self.stop_at = stop_at
        self.signal_name: str | None = None  # the signal that arrived, once one has
        self._previous: dict[int, object] = {}
        self._previous_sigint: object = None  # the handler a second Ctrl-C goes to

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():  # where handlers run
            for number in STOP_SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        self.signal_name = signal.Signals(signum).name

    @contextlib.contextmanager
    def ctrl_c(self):
        """While the steps run: the first Ctrl-C asks for a stop as SIGTERM does, a second goes
        to the handler in place before (infoxlm.interrupt's, or Python's: KeyboardInterrupt).
        Only in the main thread and over a handler that raises; an ignored SIGINT is left so."""
        current = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
        if not interrupt.raises_on_sigint(current):
            yield
            return
        self._previous_sigint = current
        signal.signal(signal.SIGINT, self._handle_ctrl_c)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, current)

    def _handle_ctrl_c(self, signum, frame) -> None:
        if self.signal_name == "Ctrl-C":  # the second: abort now
            self._previous_sigint(signum, frame)
            return
        self.signal_name = "Ctrl-C"
        # os.write, not print: a handler that prints while the main thread is inside a write
        # to the same stream (the progress bar's) raises "reentrant call".
        with contextlib.suppress(OSError, ValueError):
            os.write(sys.stderr.fileno(), b"\nCtrl-C: stopping after this step with a checkpoint "
                     b"(Ctrl-C again aborts at once, keeping the last checkpoint)\n")

    def by_signal(self, world: World) -> str | None:
        """``"SIGTERM received"`` (or the like) once a stop signal has arrived on any rank, else
        None; every rank gets the same answer (a collective when there are several)."""
        arrived = self.signal_name is not None
        if world.distributed:
            flag = torch.tensor([1.0 if arrived else 0.0], device=world.device)
            arrived = bool(all_reduce_max(flag, world).item())
        return f"{self.signal_name or 'a stop signal on another rank'} received" if arrived else None

    def reached(self, step: int, world: World) -> str | None:
        """After optimizer step ``step`` (counted from 1): why to stop now, or None.

        Called by every rank at every step boundary; all ranks get the same answer.
        """
        by_signal = self.by_signal(world)
        if by_signal is not None:
            return by_signal
        if self.stop_at is not None and step >= self.stop_at:
            return f"--stop-at {self.stop_at} reached"
        return None
