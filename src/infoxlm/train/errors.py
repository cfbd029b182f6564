"""The training layer's error: a run that cannot start or continue, said in one line."""

from __future__ import annotations

from ..errors import InfoXLMError

__all__ = ["TrainingError"]


class TrainingError(InfoXLMError):
    """A run that cannot start or continue (config clash, non-finite loss, …)."""
