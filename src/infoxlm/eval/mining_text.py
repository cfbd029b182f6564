"""The sentences of one side of ``infoxlm mine``: every input ``infoxlm prepare`` reads, one
sentence a line, each distinct sentence kept once.

A side is a text file (plain, ``.gz``, ``.xz``, ``.bz2``, ``.zst``), JSON Lines with the text
in ``--field`` (default ``text``), Parquet or a saved dataset: read by the corpus readers
(:func:`~infoxlm.corpus.record_files.input_line_blocks`), so every format reads and fails as
it does for ``prepare`` (``FILE:LINE: invalid UTF-8 …``). Blank lines are skipped (there is
nothing to mine in them); a sentence that occurs twice is embedded and mined once, as LASER's
``mine_bitexts.py --unify`` does: the lines are compared as read (no normalisation), so the
mined TSV holds each sentence as the file spells it. A line longer than ``max_length`` tokens
can reach is cut before it is held (:mod:`~infoxlm.corpus.long_lines`), and counted.

Example::

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "de.txt"
    >>> _ = path.write_text("Hallo Welt.\\n\\nHallo Welt.\\nGuten Tag.\\n", encoding="utf-8")
    >>> side = read_side(input_source(path, "--src"), {}, "--src")
    >>> side.texts, side.lines, side.blank
    (['Hallo Welt.', 'Guten Tag.'], 4, 1)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from tqdm.auto import tqdm

from ..corpus.inputs import InputSource, input_source, record_fields
from ..corpus.long_lines import LongLines
from ..corpus.record_files import input_line_blocks
from ..errors import DataError

__all__ = ["MiningSide", "mining_inputs", "read_side"]


@dataclass(frozen=True)
class MiningSide:
    """One side's distinct sentences, in the order first seen, and what reading them found."""

    label: str  # the input as named on the command line
    texts: list[str]  # distinct non-blank sentences: row i of the side's vectors is texts[i]
    lines: int  # lines read, blank ones included (a record's value may hold several)
    blank: int  # of them blank (whitespace only): skipped
    cut: int  # lines longer than max_length tokens can reach, cut to their start
    digest: str  # SHA-256 of the distinct texts: what saved vectors are checked against

    @property
    def repeated(self) -> int:
        """Lines that repeat an earlier sentence (embedded and mined once)."""
        return self.lines - self.blank - len(self.texts)


def mining_inputs(src: str, tgt: str, field: str | None = None) -> tuple[InputSource, InputSource, dict[str, str]]:
    """The two sides as inputs, and the record fields read from them (``field`` applies to the
    sides with records; given for two text files, it is refused).

    Raises:
        DataError: a missing input, ``field`` for text files only, one file named twice.
    """
    sources = input_source(src, "--src"), input_source(tgt, "--tgt")
    paths = [s.path.resolve() if s.path is not None else None for s in sources]
    if paths[0] is not None and paths[0] == paths[1]:
        raise DataError(f"--src and --tgt both name {src}; expected two corpora, one per language")
    return sources[0], sources[1], record_fields(list(sources), field)


def read_side(source: InputSource, fields: dict[str, str], flag: str, max_length: int = 512,
              progress: bool = False) -> MiningSide:
    """Read one side (``flag`` names its option in errors: ``--src``, ``--tgt``).

    Raises:
        DataError: an unreadable input, invalid UTF-8, a record without the field, or no
            sentence at all (an empty or blank input).
    """
    rows: dict[str, None] = {}  # distinct texts, insertion-ordered
    lines = blank = cut = 0
    digest = hashlib.sha256()
    total = source.path.stat().st_size if source.path is not None and source.path.is_file() else None
    with tqdm(total=total, desc=f"reading {source.label}", unit="B", unit_scale=True, disable=not progress) as bar:
        for block in input_line_blocks(source, fields, long_lines=LongLines.for_tokens(max_length)):
            for text in block.lines:
                lines += 1
                if not text or not text.strip():  # None cannot occur: invalid UTF-8 raises
                    blank += 1
                elif text not in rows:
                    rows[text] = None
                    digest.update(text.encode("utf-8") + b"\0")
            cut += block.cut
            bar.update(block.bytes_read)
    if not rows:
        what = "it is empty" if lines == 0 else f"its {lines:,} lines are all blank"
        raise DataError(f"{source.label}: no sentence to mine ({what}); expected {flag} to hold one sentence a line")
    return MiningSide(str(source.label), list(rows), lines, blank, cut, digest.hexdigest())
