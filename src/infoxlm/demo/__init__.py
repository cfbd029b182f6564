"""The embedded demo: a small real multilingual corpus shipped inside the package.

``infoxlm.demo.corpus`` reads it: English and the 14 languages of the InfoXLM paper, made
from LibreOffice, Django and Firefox translations by ``scripts/build_demo_corpus.py``
(training text, Tatoeba-format retrieval sets, a held-out retrieval set from a source the
training text never uses, and a cross-lingual classification set). The data files keep the
licences of their sources; see ``corpus/LICENSES.md``. ``infoxlm.demo.checkpoint`` finds the
small pre-trained masked LM shipped beside it (made by ``scripts/build_demo_checkpoint.py``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import DataError


def shipped_dir(name: str, marker: str, what: str, script: str) -> Path:
    """The package-data directory ``infoxlm/demo/NAME``, checked by the file ``marker`` in it;
    ``what`` and ``script`` name it and its builder in the error when it is missing."""
    path = Path(str(resources.files(__name__) / name))
    if not (path / marker).is_file():
        raise DataError(
            f"{path}: {what} is missing (no {marker}); reinstall infoxlm, whose package data must "
            f"include demo/{name}/*, or rebuild it with scripts/{script}"
        )
    return path
