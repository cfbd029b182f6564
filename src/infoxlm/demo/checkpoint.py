"""The small pre-trained masked LM shipped in ``infoxlm/demo/checkpoint`` (XLM-R's stand-in).

``scripts/build_demo_checkpoint.py`` makes it with infoxlm itself: the ``demo-checkpoint``
preset (train/presets.py; MMLM only, on the demo corpus's training text); its model card says
how. ``infoxlm demo --setting paper`` (the ``paper-demo`` preset) continues it.

    >>> from infoxlm.demo.checkpoint import checkpoint_dir
    >>> (checkpoint_dir() / "config.json").is_file()
    True
"""

from __future__ import annotations

from ..shipped import demo_checkpoint_dir as checkpoint_dir

__all__ = ["CARD_NAME", "UNIVERSAL_LAYER", "checkpoint_dir"]

CARD_NAME = "README.md"

# Where the masked LM retrieves translations best on the dev split (the paper's principle for
# the universal layer): hidden_states index, 0 = embeddings. Recorded in its config.json.
UNIVERSAL_LAYER = 3
