"""What the demo trains and evaluates: ``FULL`` (``infoxlm demo``) and ``QUICK`` (``--quick``).

The training recipe itself is the ``demo`` preset (train/config.py); a setting adds the
vocabulary, the evaluation's size and, for ``QUICK``, overrides that make it run in seconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["DemoSettings", "FULL", "QUICK"]


@dataclass(frozen=True)
class DemoSettings:
    """What the demo trains and evaluates; ``FULL`` and ``QUICK`` are the two shipped ones."""

    name: str
    vocab_size: int
    tokenizer_sentences: int  # lines sampled to learn the vocabulary
    train_overrides: tuple[str, ...]  # on top of preset("demo")
    languages: tuple[str, ...] | None = None  # None: all 14 of the corpus
    retrieval_limit: int | None = None  # sentences per language and split; None: all
    classification_limit: int | None = None  # examples per file; None: all
    classifier_epochs: int = 300

    def fingerprint(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The full demo trains the ``demo`` preset as it is (train/config.py says why each of its
# values; BENCHMARKS.md, "The demo's settings", has the figures), so that `infoxlm pretrain
# --preset demo` trains what `infoxlm demo` does.
FULL = DemoSettings(name="full", vocab_size=8000, tokenizer_sentences=200_000, train_overrides=())

# The test suite's run: checks that every stage works together, not the quality (≤ 2 minutes).
QUICK = DemoSettings(
    name="quick",
    vocab_size=2000,
    tokenizer_sentences=20_000,
    train_overrides=(
        "model.size=tiny",
        "data.mmlm_batch_size=8",
        "data.tlm_batch_size=8",
        "data.xlco_batch_size=8",
        "data.block_size=32",
        "data.tlm_max_length=48",
        "data.xlco_max_length=24",
        "data.max_tokens=1024",
        "contrast.layer=2",
        "contrast.queue_size=32",
        "contrast.normalize=true",
        "contrast.temperature=0.1",
        "contrast.momentum=0.9",
        "optim.lr=1e-3",
        "optim.warmup_steps=2",
        "optim.max_steps=12",
        "run.save_every=12",
        "run.log_every=2",
    ),
    languages=("de", "fr", "zh"),
    retrieval_limit=60,
    classification_limit=60,
    classifier_epochs=50,
)
