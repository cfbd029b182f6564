"""Read the demo corpus shipped in ``infoxlm/demo/corpus`` (and write it out as plain files).

The corpus (built by ``scripts/build_demo_corpus.py``; its README says what is in it) holds,
for English and 14 languages (ar bg de el es fr hi ru sw th tr ur vi zh):

* training text: parallel pairs ``parallel.en-XX.tsv.gz`` and monolingual text ``mono.XX.txt.gz``;
* retrieval sets in the Tatoeba / LASER format: ``dev``, ``test`` and ``heldout`` (the last
  from Firefox strings, a source the training text never uses);
* a transfer classification set: help paragraphs labelled by LibreOffice module, English
  train, English and XX test.

It is software documentation and UI text, not everyday language, and Swahili (sw) and Urdu
(ur) are small (Django strings only; Urdu has a Firefox held-out set).

Example::

    >>> from infoxlm.demo import corpus
    >>> corpus.languages()[:3]
    ['ar', 'bg', 'de']
    >>> xx, en = corpus.retrieval_pairs("de", "test")
    >>> len(xx) == len(en)
    True
    >>> paths = corpus.export_training_text("demo-text/")        # doctest: +SKIP
    >>> paths["parallel"]["en-de"]                              # doctest: +SKIP
    PosixPath('demo-text/parallel/en-de.tsv')
"""

from __future__ import annotations

import functools
import json
import unicodedata
from pathlib import Path

from infoxlm.corpus.text_files import read_decompressed
from infoxlm.demo import shipped_dir
from infoxlm.errors import DataError

__all__ = [
    "RETRIEVAL_SPLITS",
    "classification",
    "corpus_dir",
    "export_retrieval",
    "export_training_text",
    "languages",
    "load_monolingual",
    "load_parallel",
    "manifest",
    "overlap_key",
    "retrieval_languages",
    "retrieval_pairs",
    "tatoeba_code",
]

# split -> file-name prefix; "test" keeps Tatoeba's own name so exported files read as Tatoeba.
RETRIEVAL_SPLITS = {"dev": "tatoeba-dev", "test": "tatoeba", "heldout": "tatoeba-heldout"}


def corpus_dir() -> Path:
    """The directory of the shipped corpus (inside the installed package)."""
    return shipped_dir("corpus", "manifest.json", "the demo corpus", "build_demo_corpus.py")


@functools.lru_cache(maxsize=1)
def _manifest_cached(path: str) -> dict:
    return json.loads(Path(path, "manifest.json").read_text(encoding="utf-8"))


def manifest() -> dict:
    """``manifest.json``: sources, package versions, licences, counts and files."""
    return _manifest_cached(str(corpus_dir()))


def languages() -> list[str]:
    """The 14 non-English language codes of the corpus (ISO 639-1; English is ``en``)."""
    return list(manifest()["languages"])


def tatoeba_code(lang: str) -> str:
    """ISO 639-3 code used in Tatoeba file names: ``de`` -> ``deu``, ``zh`` -> ``cmn``."""
    return manifest()["tatoeba_codes"][_language(lang)]


def retrieval_languages(split: str = "test") -> list[str]:
    """Languages that have a retrieval set for ``split`` (Swahili has no held-out set)."""
    _check_split(split)
    return [lang for lang in languages() if manifest()["counts"][lang].get(split, 0) > 0]


def load_parallel(lang: str) -> list[tuple[str, str]]:
    """Training pairs ``(english, xx)`` of one language."""
    lang = _language(lang)
    pairs = []
    for number, line in enumerate(_read_lines(f"parallel.en-{lang}.tsv.gz"), start=1):
        en, tab, xx = line.partition("\t")
        if not tab or not en or not xx:
            raise DataError(f"parallel.en-{lang}.tsv.gz:{number}: expected 'english<TAB>{lang}', got {line[:60]!r}")
        pairs.append((en, xx))
    return pairs


def load_monolingual(lang: str) -> list[str]:
    """Monolingual training lines of one language (``en`` included); ``""`` separates documents."""
    lang = "en" if lang == "en" else _language(lang)
    return _read_lines(f"mono.{lang}.txt.gz")


def retrieval_pairs(lang: str, split: str = "test") -> tuple[list[str], list[str]]:
    """``(xx_sentences, english_sentences)``, line i of one the translation of line i of the other.

    ``split`` is ``dev``, ``test`` or ``heldout`` (Firefox text, never used for training).
    ``lang`` may be the two-letter code or the Tatoeba code (``de`` or ``deu``).
    """
    lang, prefix = _language(lang), RETRIEVAL_SPLITS[_check_split(split)]
    if split not in manifest()["counts"][lang] or not manifest()["counts"][lang][split]:
        raise DataError(
            f"the demo corpus has no {split} retrieval set for {lang}: its sources lack it "
            f"(languages with one: {' '.join(retrieval_languages(split))})"
        )
    code = tatoeba_code(lang)
    xx = _read_lines(f"{prefix}.{code}-eng.{code}.gz")
    en = _read_lines(f"{prefix}.{code}-eng.eng.gz")
    if len(xx) != len(en):
        raise DataError(f"{prefix}.{code}-eng.*.gz: {len(xx)} {code} lines but {len(en)} eng lines; expected equal")
    return xx, en


def classification(lang: str, split: str | None = None) -> list[tuple[str, str]]:
    """``(label, text)`` examples: which LibreOffice module a help paragraph belongs to.

    English has ``train`` (the default for ``en``) and ``test``; other languages have only
    ``test`` (the default), translations of English test paragraphs. Languages without
    translated help (ar bg hi sw th ur) have none.
    """
    lang = "en" if lang == "en" else _language(lang)
    split = split or ("train" if lang == "en" else "test")
    name = f"classification.{lang}.{split}.tsv.gz"
    if not (corpus_dir() / name).is_file():
        have = sorted(p.name for p in corpus_dir().glob("classification.*.tsv.gz"))
        raise DataError(f"the demo corpus has no {name}; it has: {', '.join(have)}")
    rows = []
    for number, line in enumerate(_read_lines(name), start=1):
        label, tab, text = line.partition("\t")
        if not tab or not label or not text:
            raise DataError(f"{name}:{number}: expected 'label<TAB>text', got {line[:60]!r}")
        rows.append((label, text))
    return rows


def export_training_text(out_dir: str | Path) -> dict[str, dict[str, Path]]:
    """Write the training text as plain UTF-8 files for ``infoxlm prepare``.

    Returns ``{"mono": {lang: path}, "parallel": {"en-xx": path}}``, with files
    ``OUT/mono/LANG.txt`` (documents separated by a blank line) and ``OUT/parallel/en-XX.tsv``
    (``english<TAB>xx``). Then, for example::

        infoxlm prepare mono --lang de --input OUT/mono/de.txt --tokenizer TOK --output STORE
        infoxlm prepare parallel --pair en-de --tsv OUT/parallel/en-de.tsv --tokenizer TOK --output STORE
    """
    out = Path(out_dir)
    paths: dict[str, dict[str, Path]] = {"mono": {}, "parallel": {}}
    for lang in ["en", *languages()]:
        if (corpus_dir() / f"mono.{lang}.txt.gz").is_file():
            paths["mono"][lang] = _write_plain(out / "mono" / f"{lang}.txt", load_monolingual(lang))
    for lang in languages():
        if (corpus_dir() / f"parallel.en-{lang}.tsv.gz").is_file():
            lines = [f"{en}\t{xx}" for en, xx in load_parallel(lang)]
            paths["parallel"][f"en-{lang}"] = _write_plain(out / "parallel" / f"en-{lang}.tsv", lines)
    return paths


def export_retrieval(out_dir: str | Path, split: str = "test") -> dict[str, tuple[Path, Path]]:
    """Write one retrieval split as plain Tatoeba files ``OUT/tatoeba.XXX-eng.{XXX,eng}``.

    The names are Tatoeba's own whatever the split, so a reader of the official Tatoeba
    directory reads them unchanged. Returns ``{lang: (xx_path, eng_path)}``.
    """
    out = Path(out_dir)
    written = {}
    for lang in retrieval_languages(split):
        xx, en = retrieval_pairs(lang, split)
        code = tatoeba_code(lang)
        written[lang] = (
            _write_plain(out / f"tatoeba.{code}-eng.{code}", xx),
            _write_plain(out / f"tatoeba.{code}-eng.eng", en),
        )
    return written


class _KeyTable(dict):
    """str.translate table: letters, digits and marks stay, everything else becomes a space."""

    def __missing__(self, char: int) -> int | str:
        self[char] = char if unicodedata.category(chr(char))[0] in "LNM" else " "
        return self[char]


_KEY_TABLE = _KeyTable()


def overlap_key(text: str) -> str:
    """The form under which two texts count as the same sentence when splits are kept apart.

    NFKC, case-folded, only letters, digits and marks (Hindi and Thai vowel signs are
    marks), single spaces. ``overlap_key("Click OK.") == overlap_key("click  ok")``.
    """
    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_KEY_TABLE).split())


# ------------------------------------------------------------------------------------------


def _language(lang: str) -> str:
    codes = manifest()["tatoeba_codes"]
    if lang in codes:
        return lang
    by_tatoeba = {v: k for k, v in codes.items()}
    if lang in by_tatoeba:
        return by_tatoeba[lang]
    raise DataError(f"the demo corpus has no language {lang!r}; it has {' '.join(codes)} (or {' '.join(by_tatoeba)})")


def _check_split(split: str) -> str:
    if split not in RETRIEVAL_SPLITS:
        raise DataError(f"retrieval split {split!r} does not exist; expected one of {', '.join(RETRIEVAL_SPLITS)}")
    return split


def _read_lines(name: str) -> list[str]:
    path = corpus_dir() / name
    if not path.is_file():
        raise DataError(f"{path}: not in the demo corpus")
    try:  # read_decompressed: a truncated file is an error naming it, not a shorter corpus
        text = read_decompressed(path).decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: invalid UTF-8 at byte {err.start}; expected UTF-8 text") from None
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def _write_plain(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8", newline="\n")
    return path
