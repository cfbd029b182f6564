"""XTREME's fine-tuning settings, one row per task, each with its source (importable without torch).

The rows are what google-research/xtreme's ``scripts/train_{task}.sh`` pass to its
``third_party/run_{classify,squad,tag}.py`` (and those scripts' defaults where the shell script
is silent), for XLM-R base-size models: a batch of 32 (8 per step × 4 accumulated; QA 4 × 8),
Adam with linear decay. Large models differ only where a script says so (XNLI's lr 3e-5).
``selection`` is how the kept model is chosen, one of :data:`SELECTIONS`:

* ``en-dev``: the best English dev score, evaluated after each epoch (XTREME's classification
  and tagging scripts keep the best checkpoint on the training language's dev set,
  ``--save_only_best_checkpoint``; they evaluate every ``--save_steps`` optimizer steps, noted as
  ``xtreme_eval_every``: ``--eval-every`` reproduces that exactly);
* ``all-dev``: the best mean dev score over every language (the InfoXLM paper's XNLI rule, #M=1);
* ``last``: the final model (XTREME's QA script, ``--save_steps -1``; the paper's MLQA rule).

    >>> XTREME["pawsx"]["lr"], XTREME["xquad"]["warmup"], XTREME["udpos"]["epochs"]
    (2e-05, '500', 10.0)
    >>> settings_for("xnli", "large", {"epochs": 2.0})["lr"], settings_for("xnli", "large", {"epochs": 2.0})["epochs"]
    (3e-05, 2.0)
"""

from __future__ import annotations

from typing import Any, Mapping

SELECTIONS = ("en-dev", "all-dev", "last")
# The optimisation keys a FinetuneConfig takes from a row (the others describe the task).
SETTING_KEYS = ("lr", "batch_size", "epochs", "warmup", "weight_decay")

_CLASSIFY = "third_party/run_classify.py (--warmup_steps 0, --weight_decay 0.0 by default)"
_QA = ("scripts/train_qa.sh: BATCH_SIZE=4 GRAD_ACC=8 MAXL=384 LR=3e-5 NUM_EPOCHS=3.0 --doc_stride 128 "
       "--warmup_steps 500 --weight_decay 0.0001 --save_steps -1 (third_party/run_squad.py keeps the final model)")
_TAG = "third_party/run_tag.py (--warmup_steps 0, --weight_decay 0.0 by default)"

XTREME: dict[str, dict[str, Any]] = {
    "xnli": dict(lr=2e-5, batch_size=32, epochs=5.0, warmup="0", weight_decay=0.0, max_length=128,
                 selection="en-dev", xtreme_eval_every=100, metric="accuracy",
                 source="scripts/train_xnli.sh: LR=2e-5 (xlm-roberta-large: 3e-5) EPOCH=5 MAXL=128 BATCH_SIZE=8 "
                        "GRAD_ACC=4 --save_steps 100 --save_only_best_checkpoint; " + _CLASSIFY),
    "pawsx": dict(lr=2e-5, batch_size=32, epochs=5.0, warmup="0", weight_decay=0.0, max_length=128,
                  selection="en-dev", xtreme_eval_every=200, metric="accuracy",
                  source="scripts/train_pawsx.sh: LR=2e-5 EPOCH=5 MAXL=128 BATCH_SIZE=8 GRAD_ACC=4 "
                         "--save_steps 200 --save_only_best_checkpoint; " + _CLASSIFY),
    "xquad": dict(lr=3e-5, batch_size=32, epochs=3.0, warmup="500", weight_decay=0.0001, max_length=384,
                  selection="last", xtreme_eval_every=None, metric="exact_match/f1 (SQuAD v1.1)", source=_QA),
    "mlqa": dict(lr=3e-5, batch_size=32, epochs=3.0, warmup="500", weight_decay=0.0001, max_length=384,
                 selection="last", xtreme_eval_every=None, metric="exact_match/f1 (MLQA)", source=_QA),
    "tydiqa": dict(lr=3e-5, batch_size=32, epochs=3.0, warmup="500", weight_decay=0.0001, max_length=384,
                   selection="last", xtreme_eval_every=None, metric="exact_match/f1 (SQuAD v1.1)",
                   source=_QA + "; trained on TyDiQA-GoldP's English training questions"),
    "panx": dict(lr=2e-5, batch_size=32, epochs=10.0, warmup="0", weight_decay=0.0, max_length=128,
                 selection="en-dev", xtreme_eval_every=1000, metric="f1 (seqeval)",
                 source="scripts/train_panx.sh: LR=2e-5 NUM_EPOCHS=10 MAX_LENGTH=128 BATCH_SIZE=8 GRAD_ACC=4 "
                        "--save_steps 1000 --save_only_best_checkpoint --train_langs en; " + _TAG),
    "udpos": dict(lr=2e-5, batch_size=32, epochs=10.0, warmup="0", weight_decay=0.0, max_length=128,
                  selection="en-dev", xtreme_eval_every=500, metric="f1 (seqeval)",
                  source="scripts/train_udpos.sh: LR=2e-5 NUM_EPOCHS=10 MAX_LENGTH=128 BATCH_SIZE=8 GRAD_ACC=4 "
                         "--save_steps 500 --save_only_best_checkpoint; " + _TAG),
}
# What a large model changes (the same scripts' branches for xlm-roberta-large).
XTREME_LARGE: dict[str, dict[str, Any]] = {"xnli": dict(lr=3e-5)}
# The task names infoxlm's commands use for XTREME's: PAN-X is `finetune wikiann`.
ALIASES = {"wikiann": "panx"}


def row(task: str, size: str = "base") -> dict[str, Any]:
    """The task's row (``wikiann`` reads ``panx``), with the large-model changes for ``size="large"``."""
    task = ALIASES.get(task, task)
    if task not in XTREME:
        raise KeyError(f"no XTREME settings for task {task!r}; known: {' '.join(XTREME)}")
    return {**XTREME[task], **(XTREME_LARGE.get(task, {}) if size == "large" else {})}


def settings_for(task: str, size: str, explicit: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One run's optimisation settings: the row's, with the explicitly given ones over them."""
    defaults = {key: row(task, size)[key] for key in SETTING_KEYS}
    return {**defaults, **{k: v for k, v in (explicit or {}).items() if v is not None and k in SETTING_KEYS}}


def dev_languages(selection: str, languages: list[str]) -> list[str]:
    """The dev languages a ``selection`` reads: English, every test language, or none."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection {selection!r}: expected one of {', '.join(SELECTIONS)}")
    return {"en-dev": ["en"], "all-dev": list(languages), "last": []}[selection]
