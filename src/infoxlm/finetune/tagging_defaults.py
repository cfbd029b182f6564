"""XTREME's settings for its token-classification tasks, read from the one table of
:mod:`~infoxlm.finetune.xtreme_defaults` (its PAN-X and UD-POS rows, which agree), importable
without torch (the CLI reads them)."""

from __future__ import annotations

from .xtreme_defaults import SELECTIONS, SETTING_KEYS, XTREME

__all__ = ["MAX_LENGTH", "SELECTIONS", "SETTINGS", "XTREME_NAMES"]

# finetune's task name → XTREME's (its prediction folder and evaluate.py task).
XTREME_NAMES = {"wikiann": "panx", "udpos": "udpos"}
SETTINGS = {k: XTREME["panx"][k] for k in SETTING_KEYS}
MAX_LENGTH = XTREME["panx"]["max_length"]
