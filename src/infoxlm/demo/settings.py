"""What the demo trains and evaluates: ``FULL`` (``infoxlm demo``), ``QUICK`` (``--quick``),
``PAPER`` (``--setting paper``) and ``PAPER_QUICK`` (``--setting paper --quick``).

A setting names a preset (the recipe: train/presets.py, what ``infoxlm pretrain --preset
NAME`` trains), the models trained (each a name, a table label and its changes to the recipe:
the paper's ablations, read from train/ablations.py, the table ``pretrain --no-xlco`` reads), where training starts (from scratch, or the shipped pre-trained checkpoint the
preset continues), the vocabulary and the evaluation's size. ``FULL`` trains the ``demo``
preset with multi-way pairs; ``PAPER`` the ``paper-demo`` preset, the paper's own recipe (``base``) scaled down.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..train.ablations import Changes, ablated

__all__ = ["DemoSettings", "FULL", "QUICK", "PAPER", "PAPER_QUICK"]


def _ablated(directory: str, *ablations: str) -> tuple[str, str, Changes]:
    """A model of the settings: its directory, the paper's row label and the changes of those ablations."""
    return (directory, *ablated(*ablations))


@dataclass(frozen=True)
class DemoSettings:
    """What the demo trains and evaluates; ``FULL`` and ``QUICK`` are the two shipped ones."""

    name: str
    vocab_size: int  # of the vocabulary learned from the corpus (from scratch only)
    tokenizer_sentences: int  # lines sampled to learn the vocabulary
    preset: str  # the recipe every model starts from (train/presets.py)
    # Continue the shipped pre-trained masked LM (its weights and vocabulary; the preset's
    # model.init) instead of training from scratch with a vocabulary learned here.
    from_checkpoint: bool = False
    # (directory name, table label, changes to the recipe); the first is the full method.
    models: tuple[tuple[str, str, Changes], ...] = (
        ("infoxlm", "InfoXLM", {}),
        _ablated("no-xlco", "no-xlco"),
    )
    # Retrieval splits scored; with "dev", each model's layer is the one best on dev, without
    # it the protocol's (the universal layer `infoxlm eval tatoeba` defaults to).
    splits: tuple[str, ...] = ("dev", "test", "heldout")
    languages: tuple[str, ...] | None = None  # None: all 14 of the corpus
    retrieval_limit: int | None = None  # sentences per language and split; None: all
    classification_limit: int | None = None  # examples per file; None: all
    classifier_epochs: int = 300

    def fingerprint(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The full demo trains the ``demo-multiway`` preset: the ``demo`` recipe (train/presets.py says
# why each of its values; BENCHMARKS.md, "The demo's settings", has the figures) with half of
# its pairs xx–yy, the recipe past the paper that gained on every split in three seeds at the
# same steps and time ("Recipes past the paper").
FULL = DemoSettings(name="full", vocab_size=8000, tokenizer_sentences=200_000, preset="demo-multiway")

# The test suite's run: checks that every stage works together, not the quality (≤ 2 minutes).
QUICK = DemoSettings(
    name="quick",
    vocab_size=2000,
    tokenizer_sentences=20_000,
    preset="demo-quick",
    languages=("de", "fr", "zh"),
    retrieval_limit=60,
    classification_limit=60,
    classifier_epochs=50,
)

# The paper's main setting at the scale of two CPU cores: continue the shipped masked LM with
# the paper's recipe, scaled (the ``paper-demo`` preset says how and why), and train the
# paper's ablations beside it.
PAPER = DemoSettings(
    name="paper",
    vocab_size=8000,
    tokenizer_sentences=0,
    preset="paper-demo",
    from_checkpoint=True,
    models=(
        ("infoxlm", "InfoXLM", {}),
        _ablated("no-xlco", "no-xlco"),
        _ablated("no-tlm", "no-tlm"),
        # The paper ablates mixup and momentum on top of −TLM (its Table 5, rows 4 and 5).
        _ablated("no-mixup", "no-tlm", "no-mixup"),
        _ablated("no-momentum", "no-tlm", "no-momentum"),
        ("last-layer", "XLCO on the last layer", {"contrast": {"layer": 4}}),
    ),
    splits=("test", "heldout"),
)

# PAPER's pipeline in about two minutes: the tests' run.
PAPER_QUICK = dataclasses.replace(
    PAPER,
    name="paper-quick",
    preset="paper-demo-quick",
    languages=("de", "fr", "zh"),
    retrieval_limit=40,
    classification_limit=30,
    classifier_epochs=20,
)
