"""The paper's fine-tuning settings by model size, importable without torch (the CLI reads them).

Appendix, "Hyperparameters used for fine-tuning BASE-size models on XNLI and MLQA": XNLI batch
32, lr {5e-6, 7e-6, 1e-5}, 12,500 warm-up steps, weight decay 0, 10 epochs; MLQA batch {16, 32},
lr {2e-5, 3e-5, 5e-5}, 10% warm-up, weight decay 0, {2, 3, 4} epochs. "... LARGE-size models":
XNLI batch 32, lr {4e-6, 5e-6, 6e-6}, 5,000 warm-up steps, weight decay {0, 0.01}, 10 epochs;
MLQA batch 32, lr {2e-5, 3e-5, 5e-5}, 10% warm-up, weight decay 0, {2, 3, 4} epochs. Both tasks
are searched on the joint dev set of all languages (#M=1); XNLI evaluates every 5,000 steps and
keeps the best model, MLQA keeps the final one. ``GRIDS`` are those sets; ``DEFAULTS`` (a run
without ``--search``) take the middle value of each set, 32 for the MLQA batch (the large
table's value) and weight decay 0 (the base table's).

Not in the paper: ``small``, every model below base's shape (fewer than 12 layers or a hidden
size under 768: the demo's 4 × 256, a distilled model). The base schedule leaves such a model
at chance (lr 7e-6 and 12,500 warm-up steps: a small set ends before the learning rate rises);
small models take the larger learning rates of small BERTs (Turc et al., 2019, "Well-Read
Students Learn Better": 1e-4 to 3e-4) with a 10% warm-up. XNLI: lr 3e-4, 5 epochs; on the
shipped demo checkpoint and an XNLI-format set built from the demo corpus this beats chance
(33.3) by 35.0 points in English and 9.5 on average over en, de, fr, es (docs/finetuning.md;
tests/finetune/test_defaults.py). MLQA: lr 3e-4, 3 epochs (unmeasured: the demo has no QA data).

    >>> model_size(1024, 24), model_size(768, 12), model_size(256, 4)
    ('large', 'base', 'small')
    >>> [s["lr"] for s in grid("xnli", "base")]
    [5e-06, 7e-06, 1e-05]
    >>> len(grid("mlqa", "base")), len(grid("mlqa", "base", {"lr": 3e-5, "epochs": 2.0}))
    (18, 2)
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

TASKS = ("xnli", "mlqa")
SIZES = ("small", "base", "large")
# The searched settings, in the order a grid enumerates them (the first varies slowest).
GRID_KEYS = ("lr", "batch_size", "epochs", "warmup", "weight_decay")
GRIDS: dict[tuple[str, str], dict[str, tuple]] = {
    ("xnli", "base"): dict(lr=(5e-6, 7e-6, 1e-5), batch_size=(32,), epochs=(10.0,), warmup=("12500",), weight_decay=(0.0,)),
    ("xnli", "large"): dict(lr=(4e-6, 5e-6, 6e-6), batch_size=(32,), epochs=(10.0,), warmup=("5000",), weight_decay=(0.0, 0.01)),
    ("mlqa", "base"): dict(lr=(2e-5, 3e-5, 5e-5), batch_size=(16, 32), epochs=(2.0, 3.0, 4.0), warmup=("10%",), weight_decay=(0.0,)),
    ("mlqa", "large"): dict(lr=(2e-5, 3e-5, 5e-5), batch_size=(32,), epochs=(2.0, 3.0, 4.0), warmup=("10%",), weight_decay=(0.0,)),
    # infoxlm's, not the paper's (see above)
    ("xnli", "small"): dict(lr=(1e-4, 3e-4, 1e-3), batch_size=(32,), epochs=(5.0,), warmup=("10%",), weight_decay=(0.0,)),
    ("mlqa", "small"): dict(lr=(1e-4, 3e-4, 1e-3), batch_size=(16, 32), epochs=(2.0, 3.0, 4.0), warmup=("10%",), weight_decay=(0.0,)),
}
DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    ("xnli", "base"): dict(lr=7e-6, batch_size=32, epochs=10.0, warmup="12500", weight_decay=0.0),
    ("xnli", "large"): dict(lr=5e-6, batch_size=32, epochs=10.0, warmup="5000", weight_decay=0.0),
    ("mlqa", "base"): dict(lr=3e-5, batch_size=32, epochs=3.0, warmup="10%", weight_decay=0.0),
    ("mlqa", "large"): dict(lr=3e-5, batch_size=32, epochs=3.0, warmup="10%", weight_decay=0.0),
    ("xnli", "small"): dict(lr=3e-4, batch_size=32, epochs=5.0, warmup="10%", weight_decay=0.0),
    ("mlqa", "small"): dict(lr=3e-4, batch_size=32, epochs=3.0, warmup="10%", weight_decay=0.0),
}
# Where each size's defaults come from, as a run prints and results.json records it.
ORIGINS = {
    "base": "the paper's appendix, base models",
    "large": "the paper's appendix, large models",
    "small": "infoxlm's for models below base's 12 layers × 768, where the paper's base schedule stays at chance",
}
XNLI_EVAL_EVERY = 5000

XNLI_SETTINGS = ("cross-lingual-transfer", "translate-train-all")
XNLI = dict(DEFAULTS["xnli", "base"], eval_every=XNLI_EVAL_EVERY)
XNLI_MAX_LENGTH = 128  # XTREME's XNLI setting; the paper does not say

MLQA = dict(DEFAULTS["mlqa", "base"])
MLQA_SELECTIONS = ("last", "dev")
# BERT's SQuAD settings (run_squad.py), which XTREME keeps for MLQA.
MAX_LENGTH = 384
DOC_STRIDE = 128
MAX_QUERY_LENGTH = 64
N_BEST = 20
MAX_ANSWER_LENGTH = 30


def model_size(hidden_size: int, num_layers: int) -> str:
    """'large' for XLM-R large's shape (24 layers × 1024) or anything bigger in either; 'small'
    below base's (fewer than 12 layers or hidden size under 768); else 'base'."""
    if num_layers >= 24 or hidden_size >= 1024:
        return "large"
    return "small" if num_layers < 12 or hidden_size < 768 else "base"


def choice(task: str, size: str, explicit: Mapping[str, Any] | None = None, *, search: bool = False) -> dict[str, Any]:
    """How a run's settings were chosen, as results.json records it (``"settings_chosen"``).

    >>> choice("xnli", "small", {"lr": 1e-4, "epochs": None})["given"]
    ['lr']
    """
    return {
        "model_size": size,
        "from": ORIGINS[size] + (", searched" if search else ""),
        "given": [k for k, v in (explicit or {}).items() if v is not None],
        "defaults": dict(DEFAULTS[task, size]),
    }


def settings_for(task: str, size: str, explicit: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One run's settings: the size's defaults, with the explicitly given ones over them."""
    return {**DEFAULTS[task, size], **{k: v for k, v in (explicit or {}).items() if v is not None}}


def grid(task: str, size: str, explicit: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every setting of the paper's grid for ``task`` and ``size``; an explicitly given value
    replaces its dimension of the grid (``--search --lr 3e-5`` searches the rest at lr 3e-5)."""
    dims = dict(GRIDS[task, size])
    for key, value in (explicit or {}).items():
        if value is not None:
            dims[key] = (value,)
    return [dict(zip(GRID_KEYS, values)) for values in itertools.product(*(dims[k] for k in GRID_KEYS))]
