"""The paper's fine-tuning defaults, importable without torch (the command line reads them).

Appendix, Table "Hyperparameters used for fine-tuning BASE-size models on XNLI and MLQA":
XNLI batch 32, lr {5e-6, 7e-6, 1e-5}, 12,500 warm-up steps, weight decay 0, 10 epochs, an
evaluation every 5,000 steps; MLQA batch {16, 32}, lr {2e-5, 3e-5, 5e-5}, 10% warm-up, weight
decay 0, {2, 3, 4} epochs, final model. Where the paper gives a search range and not the winner,
the default is the middle value (or 32 for the MLQA batch).
"""

XNLI_SETTINGS = ("cross-lingual-transfer", "translate-train-all")
XNLI = dict(lr=7e-6, batch_size=32, epochs=10.0, warmup="12500", weight_decay=0.0, eval_every=5000)
XNLI_MAX_LENGTH = 128  # XTREME's XNLI setting; the paper does not say

MLQA = dict(lr=3e-5, batch_size=32, epochs=3.0, warmup="10%", weight_decay=0.0)
MLQA_SELECTIONS = ("last", "dev")
# BERT's SQuAD settings (run_squad.py), which XTREME keeps for MLQA.
MAX_LENGTH = 384
DOC_STRIDE = 128
MAX_QUERY_LENGTH = 64
N_BEST = 20
MAX_ANSWER_LENGTH = 30
