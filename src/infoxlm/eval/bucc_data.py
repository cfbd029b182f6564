"""The BUCC 2018 shared task's files, as shipped or as XTREME renames them.

For a pair ``xx-en`` (``de``, ``fr``, ``ru``, ``zh``) and a split:

* ``{xx}-en.{split}.{xx}`` and ``{xx}-en.{split}.en``: one sentence a line, ``id<TAB>sentence``
  (``de-000000001<TAB>Die Katze …``), ids unique within a file;
* ``{xx}-en.{split}.gold``: one hidden translation pair a line, ``xx-id<TAB>en-id``; a split
  without it (the official ``test``, XTREME's ``test``) can be mined but not scored.

The shipped splits are ``sample``, ``training`` (gold with both) and ``test``; XTREME's download
renames ``sample`` to ``dev`` and ``training`` to ``test``, without its gold. The files lie in
``DATA/{xx}-en/`` (as the tarballs unpack) or directly in ``DATA/`` (XTREME's layout). Every
problem (a missing or extra column, an id twice, a gold line naming an unknown id, an empty
side, invalid UTF-8) is an ``EvalDataError`` naming the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import EvalDataError
from .eval_lines import read_lines

TARGET = "en"  # English is always the second side of a BUCC pair
# The order splits are listed and evaluated in: development first, then the larger ones.
SPLIT_ORDER = ("sample", "dev", "training", "test")
_PAIR = re.compile(r"^([a-z]{2,3})-en$")


@dataclass(frozen=True)
class BuccSide:
    """One side of a split: line i of ``path`` is ``ids[i]<TAB>texts[i]``."""

    path: Path
    ids: list[str]
    texts: list[str]


@dataclass(frozen=True)
class BuccSplit:
    """A pair's split: the xx side, the English side and, if shipped, the gold pairs (xx id, en id)."""

    pair: str  # "de-en"
    name: str  # "training"
    src: BuccSide
    trg: BuccSide
    gold: frozenset[tuple[str, str]] | None
    gold_path: Path | None

    @property
    def language(self) -> str:
        return self.pair.split("-")[0]


def pair_name(text: str) -> str:
    """``de-en`` (or ``de``) → ``de-en``; anything else is refused."""
    pair = text if "-" in text else f"{text}-{TARGET}"
    if not _PAIR.match(pair):
        raise EvalDataError(f"BUCC pair {text!r}: expected xx-en (de-en, fr-en, ru-en, zh-en)")
    return pair


def _data_folder(data: str | Path) -> Path:
    data = Path(data)
    if not data.is_dir():
        raise EvalDataError(f"{data}: not a directory; expected the BUCC 2018 files (de-en.training.de, …)")
    return data


def _folder(data: Path, pair: str) -> Path:
    """Where a pair's files are: DATA/{pair}/ as the tarballs unpack, else DATA/ (XTREME's)."""
    nested = data / pair
    return nested if any(nested.glob(f"{pair}.*.{TARGET}")) else data


def find_pairs(data: Path) -> list[str]:
    """Every pair with files in ``data`` (flat or one folder per pair), sorted."""
    names = {p.name.split(".")[0] for p in [*data.glob(f"*-en.*.{TARGET}"), *data.glob(f"*-en/*-en.*.{TARGET}")]}
    found = sorted(name for name in names if _PAIR.match(name))
    if not found:
        raise EvalDataError(f"{data}: no BUCC files (xx-en.SPLIT.en); expected the BUCC 2018 layout, e.g. de-en.training.en")
    return found


def find_splits(data: Path, pair: str) -> list[str]:
    """The splits a pair has files of, in :data:`SPLIT_ORDER` (others after, sorted)."""
    folder = _folder(data, pair)
    names = {p.name[len(pair) + 1 : -len(TARGET) - 1] for p in folder.glob(f"{pair}.*.{TARGET}")}
    if not names:
        raise EvalDataError(f"{folder / f'{pair}.SPLIT.en'}: no such files; expected the BUCC files of {pair} in {data}")
    return sorted(names, key=lambda s: (SPLIT_ORDER.index(s) if s in SPLIT_ORDER else len(SPLIT_ORDER), s))


def _rows(path: Path, columns: str, cut_lines: dict[str, int] | None = None) -> list[tuple[int, list[str]]]:
    """(line number, the two tab-separated fields) of every line of a BUCC file."""
    lines = read_lines(path, f"lines {columns}", cut_lines)
    rows = []
    for number, line in enumerate(lines, start=1):
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0]:
            found = "a blank line" if not line.strip() else f"{len(fields)} tab-separated column{'s' * (len(fields) != 1)}"
            raise EvalDataError(f"{path}:{number}: {found}; expected 2 columns, {columns}")
        rows.append((number, fields))
    return rows


def read_side(path: Path, cut_lines: dict[str, int] | None = None) -> BuccSide:
    """A side's ids and sentences; an id that appears twice is refused."""
    first: dict[str, int] = {}
    ids, texts = [], []
    for number, (id_, text) in _rows(path, "id<TAB>sentence", cut_lines):
        if id_ in first:
            raise EvalDataError(f"{path}:{number}: id {id_!r} appears twice (first on line {first[id_]}); expected unique ids")
        first[id_] = number
        ids.append(id_)
        texts.append(text)
    return BuccSide(path, ids, texts)


def read_gold(path: Path, src: BuccSide, trg: BuccSide) -> frozenset[tuple[str, str]]:
    """The gold pairs (xx id, en id); each id must be one of its side's file."""
    known = (set(src.ids), set(trg.ids))
    gold = set()
    for number, (src_id, trg_id) in _rows(path, "xx-id<TAB>en-id"):
        for id_, ids, side in ((src_id, known[0], src), (trg_id, known[1], trg)):
            if id_ not in ids:
                raise EvalDataError(f"{path}:{number}: id {id_!r} is not in {side.path}; expected ids of the pair's two files")
        gold.add((src_id, trg_id))
    return frozenset(gold)


def load_split(data: Path, pair: str, split: str, cut_lines: dict[str, int] | None = None) -> BuccSplit:
    """Read and check one split of a pair (its gold too, when the split has one)."""
    folder, xx = _folder(data, pair), pair.split("-")[0]
    src = read_side(folder / f"{pair}.{split}.{xx}", cut_lines)
    trg = read_side(folder / f"{pair}.{split}.{TARGET}", cut_lines)
    gold_path = folder / f"{pair}.{split}.gold"
    if not gold_path.exists():
        return BuccSplit(pair, split, src, trg, None, None)
    return BuccSplit(pair, split, src, trg, read_gold(gold_path, src, trg), gold_path)


def load_bucc(data: str | Path, pairs: Sequence[str] | None, splits: Sequence[str] | None, tune_on: str,
              cut_lines: dict[str, int] | None = None) -> list[BuccSplit]:
    """Every requested split of every requested pair (default: all found), read and checked,
    the tuning split included and holding gold for each pair."""
    data = _data_folder(data)
    chosen = [pair_name(p) for p in pairs] if pairs else find_pairs(data)
    loaded = []
    for pair in dict.fromkeys(chosen):
        available = find_splits(data, pair)
        wanted = list(dict.fromkeys([*(splits or available), tune_on]))
        for split in wanted:
            if split not in available:
                raise EvalDataError(f"{_folder(data, pair) / f'{pair}.{split}.{TARGET}'}: missing; "
                                    f"{pair} has the splits {', '.join(available)}")
        for split in sorted(wanted, key=available.index):
            loaded.append(load_split(data, pair, split, cut_lines))
        tuning = next(s for s in loaded if s.pair == pair and s.name == tune_on)
        if tuning.gold is None:
            raise EvalDataError(f"{tuning.src.path.with_suffix('.gold')}: missing; --tune-on {tune_on} needs the gold "
                                f"pairs of every pair (a split shipped with gold: {', '.join(_with_gold(data, pair, available))})")
    return loaded


def default_tune_on(data: str | Path, pairs: Sequence[str] | None) -> str:
    """The split that tunes the threshold when none is named: ``sample``, BUCC's development
    split, or ``dev``, its name in XTREME's layout (whichever the first pair has)."""
    data = _data_folder(data)
    pair = pair_name(pairs[0]) if pairs else find_pairs(data)[0]
    available = find_splits(data, pair)
    for split in ("sample", "dev"):
        if split in available:
            return split
    raise EvalDataError(f"{data}: {pair} has no sample or dev split; pass --tune-on, one of {', '.join(available)}")


def _with_gold(data: Path, pair: str, splits: list[str]) -> list[str]:
    folder = _folder(data, pair)
    return [s for s in splits if (folder / f"{pair}.{s}.gold").is_file()] or ["none"]
