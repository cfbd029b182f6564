"""XTREME's settings for its token-classification tasks, importable without torch (the CLI reads them).

Source: google-research/xtreme, ``scripts/train_panx.sh`` and ``scripts/train_udpos.sh`` (the
same values for both): LR=2e-5, NUM_EPOCHS=10, MAX_LENGTH=128, per-GPU batch 8 × 4 accumulated
steps = 32 for base-size models; ``third_party/run_tag.py``'s defaults for what the scripts do
not set: warm-up 0 steps, weight decay 0. XTREME keeps the checkpoint with the best dev F1
(``--save_only_best_checkpoint``), training on English.
"""

from __future__ import annotations

SETTINGS = dict(lr=2e-5, batch_size=32, epochs=10.0, warmup="0", weight_decay=0.0)
MAX_LENGTH = 128
# Which model is kept: best English dev F1 after each epoch (XTREME), best average dev F1 of
# every tested language (the InfoXLM paper's #M=1 rule), or the final weights.
SELECTIONS = ("en-dev", "all-dev", "last")
# finetune's task name → XTREME's (its prediction folder and evaluate.py task).
XTREME_NAMES = {"wikiann": "panx", "udpos": "udpos"}
