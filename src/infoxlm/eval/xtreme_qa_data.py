"""The files of XTREME's two other QA tasks, XQuAD and TyDiQA-GoldP (both SQuAD v1.1 JSON).

* XQuAD (``deepmind/xquad``): ``DIR/xquad.{lang}.json`` for ar de el en es hi ru th tr vi zh,
  the 240 paragraphs / 1,190 questions of SQuAD v1.1 dev translated; test only (no dev, no
  training data: models train on SQuAD v1.1 ``train-v1.1.json``; English dev is SQuAD's
  ``dev-v1.1.json``).
* TyDiQA-GoldP v1.1 (``storage.googleapis.com/tydiqa/v1.1``): the training file
  ``DIR/tydiqa-goldp-v1.1-train.json`` (all nine languages; a question's language is the start
  of its id, ``english-…``), and the dev archive's ``DIR/tydiqa-goldp-v1.1-dev/
  tydiqa-goldp-dev-{arabic,…}.json``, which XTREME reports as the test set. XTREME's
  ``utils_preprocess.py`` layout is read too: ``tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json``
  (English only) and ``tydiqa-goldp-v1.1-dev/tydiqa.goldp.{iso}.dev.json``.
"""

from __future__ import annotations

from pathlib import Path

from .mlqa_data import MLQADataError, QAExample, read_squad

XQUAD_LANGUAGES = ("ar", "de", "el", "en", "es", "hi", "ru", "th", "tr", "vi", "zh")
# TyDiQA-GoldP's file names spell the language out; XTREME renames them to ISO codes.
TYDIQA_NAMES = {"ar": "arabic", "bn": "bengali", "en": "english", "fi": "finnish", "id": "indonesian",
                "ko": "korean", "ru": "russian", "sw": "swahili", "te": "telugu"}
TYDIQA_LANGUAGES = tuple(TYDIQA_NAMES)
TYDIQA_TRAIN = "tydiqa-goldp-v1.1-train.json"
TYDIQA_DEV_DIR = "tydiqa-goldp-v1.1-dev"


class XtremeQADataError(MLQADataError):
    """An XQuAD or TyDiQA-GoldP file that is missing or malformed, or a language it lacks."""


def check_qa_languages(task: str, languages: list[str] | None, known: tuple[str, ...]) -> list[str]:
    """The requested languages (default: all of ``known``), each checked."""
    chosen = list(known if not languages else languages)
    for lang in chosen:
        if lang not in known:
            raise XtremeQADataError(f"{task} language {lang!r}: expected one of {' '.join(known)}")
    return chosen


def xquad_file(root: str | Path, lang: str) -> Path:
    """``root/xquad.{lang}.json``."""
    path = Path(root) / f"xquad.{lang}.json"
    if not path.is_file():
        raise XtremeQADataError(f"{Path(root)}: no xquad.{lang}.json (the XQuAD test file for {lang})")
    return path


def tydiqa_test_file(root: str | Path, lang: str) -> Path:
    """The GoldP dev file of ``lang`` (XTREME's test set), by its released or XTREME's name."""
    folder = Path(root) / TYDIQA_DEV_DIR
    names = [f"tydiqa-goldp-dev-{TYDIQA_NAMES[lang]}.json", f"tydiqa.goldp.{lang}.dev.json"]
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise XtremeQADataError(f"{folder}: no {' or '.join(names)} (the TyDiQA-GoldP dev file XTREME tests {lang} on)")


def read_tydiqa_english_train(root: str | Path) -> tuple[Path, list[QAExample]]:
    """(the file read, its English training questions): ``tydiqa-goldp-v1.1-train.json`` keeps
    the questions whose id starts with ``english-`` (XTREME's split of it, by id prefix), or
    XTREME's ``tydiqa-goldp-v1.1-train/tydiqa.goldp.en.train.json`` whole."""
    root = Path(root)
    split = root / "tydiqa-goldp-v1.1-train" / "tydiqa.goldp.en.train.json"
    for path in (root / TYDIQA_TRAIN, root / "tydiqa-goldp-v1.1-train" / TYDIQA_TRAIN):
        if path.is_file():
            english = [x for x in read_squad(path) if x.id.split("-")[0] == "english"]
            if not english:
                raise XtremeQADataError(f"{path}: no English training question (ids starting with 'english-')")
            return path, english
    if split.is_file():
        return split, read_squad(split)
    raise XtremeQADataError(f"{root}: no {TYDIQA_TRAIN} here or in tydiqa-goldp-v1.1-train/ "
                            f"(nor XTREME's {split.relative_to(root)})")
