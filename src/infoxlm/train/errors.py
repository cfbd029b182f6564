"""The training layer's errors: a run that cannot start or continue, or a checkpoint that
cannot be trusted, said in one line."""

from __future__ import annotations

from ..errors import InfoXLMError

__all__ = ["CheckpointCorrupt", "NonFiniteStep", "TrainingError", "UnsafeCheckpoint"]


class TrainingError(InfoXLMError):
    """A run that cannot start or continue (config clash, non-finite loss, …)."""


class CheckpointCorrupt(InfoXLMError):
    """A checkpoint file that cannot be read, or whose content is not what was written."""


class UnsafeCheckpoint(CheckpointCorrupt):
    """A checkpoint file that names code to run when it is unpickled: refused, never skipped
    for an older checkpoint, since it was made, not damaged."""


class NonFiniteStep(TrainingError):
    """A step whose losses or gradient are not finite: stopped before the update (the trainer
    adds where the last good checkpoint is)."""
