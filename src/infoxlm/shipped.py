"""Package data shipped inside infoxlm, under ``infoxlm/demo/``: the demo corpus (``corpus/``,
built by ``scripts/build_demo_corpus.py``) and the small pre-trained masked LM the paper's
setting of the demo continues (``checkpoint/``, built by ``scripts/build_demo_checkpoint.py``).

Found here, below every subpackage, because more than the demo reads them: the ``paper-demo``
presets (train/presets.py) continue the checkpoint. They are data files, not modules.

    >>> (demo_checkpoint_dir() / "config.json").is_file()
    True
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .errors import DataError

__all__ = ["demo_checkpoint_dir", "shipped_dir"]


def shipped_dir(name: str, marker: str, what: str, script: str) -> Path:
    """The package-data directory ``infoxlm/demo/NAME``, checked by the file ``marker`` in it;
    ``what`` and ``script`` name it and its builder in the error when it is missing."""
    path = Path(str(resources.files(__package__) / "demo" / name))
    if not (path / marker).is_file():
        raise DataError(
            f"{path}: {what} is missing (no {marker}); reinstall infoxlm, whose package data must "
            f"include demo/{name}/*, or rebuild it with scripts/{script}"
        )
    return path


def demo_checkpoint_dir() -> Path:
    """The shipped pre-trained masked LM's directory (a Hugging Face XLM-R directory)."""
    return shipped_dir("checkpoint", "config.json", "the demo's pre-trained checkpoint", "build_demo_checkpoint.py")
