"""The small pre-trained masked LM shipped in ``infoxlm/demo/checkpoint`` (XLM-R's stand-in).

``scripts/build_demo_checkpoint.py`` makes it with infoxlm itself, MMLM only, on the demo
corpus's training text; its model card says how. ``infoxlm demo --setting paper`` continues it.

    >>> from infoxlm.demo.checkpoint import checkpoint_dir
    >>> (checkpoint_dir() / "config.json").is_file()
    True
"""

from __future__ import annotations

from pathlib import Path

from . import shipped_dir

__all__ = ["CARD_NAME", "TRAINING_OVERRIDES", "UNIVERSAL_LAYER", "checkpoint_dir"]

CARD_NAME = "README.md"

# The masked LM's recipe on top of preset("demo"): MMLM alone, 64 blocks of up to 64 tokens a
# step, weights from N(0, 0.02²) (XLM-R's initialisation), dropout 0, lr 1e-3. With the demo
# preset's U[-0.02, 0.02], dropout 0.1 and lr 2e-3 the loss sat at the unigram level
# (7.2–7.6) from step 300 to 900; with these it fell below 6.6 by step 175 (BENCHMARKS.md,
# "The paper's setting").
TRAINING_OVERRIDES = (
    "data.tlm_batch_size=0",
    "data.xlco_batch_size=0",
    "data.mmlm_batch_size=64",
    "model.init_scheme=normal",
    "model.dropout=0.0",
    "optim.lr=1e-3",
    "optim.warmup_steps=100",
    "optim.max_steps=2400",
    "run.save_every=2400",
    "run.log_every=25",
)

# Where the masked LM retrieves translations best on the dev split (the paper's principle for
# the universal layer): hidden_states index, 0 = embeddings.
UNIVERSAL_LAYER = 3


def checkpoint_dir() -> Path:
    """The shipped checkpoint's directory (inside the installed package)."""
    return shipped_dir("checkpoint", "config.json", "the demo's pre-trained checkpoint", "build_demo_checkpoint.py")
