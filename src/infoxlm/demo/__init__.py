"""The embedded demo: a small real multilingual corpus shipped inside the package.

``infoxlm.demo.corpus`` reads it: English and the 14 languages of the InfoXLM paper, made
from LibreOffice, Django and Firefox translations by ``scripts/build_demo_corpus.py``
(training text, Tatoeba-format retrieval sets, a held-out retrieval set from a source the
training text never uses, and a cross-lingual classification set). The data files keep the
licences of their sources; see ``corpus/LICENSES.md``. ``infoxlm.demo.checkpoint`` finds the
small pre-trained masked LM shipped beside it (made by ``scripts/build_demo_checkpoint.py``).
"""

from __future__ import annotations

from ..shipped import shipped_dir

__all__ = ["shipped_dir"]
