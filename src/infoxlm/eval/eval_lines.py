"""The lines of an evaluation file (Tatoeba, BUCC, Flores): every line, blank ones included,
each read only as far as an encoder can embed it, problems as one ``EvalDataError`` naming
the file (and line)."""

from __future__ import annotations

from pathlib import Path

from ..embedding import read_sentences
from ..errors import DataError, EvalDataError


def read_lines(path: Path, expected: str, cut_lines: dict[str, int] | None = None, max_length: int = 512) -> list[str]:
    """The lines of a UTF-8 file; a missing or empty file is refused, saying it should be
    ``expected`` ("a text file of one sentence a line"). ``cut_lines`` (if given) receives
    ``{file: lines cut}`` when lines are longer than ``max_length`` tokens can reach."""
    if not path.is_file():
        raise EvalDataError(f"{path}: missing; expected {expected}")
    try:
        lines, cut = read_sentences(path, max_length)
    except DataError as err:  # the data reader's FILE:LINE message, as an evaluation error
        raise EvalDataError(str(err)) from None
    if not lines:
        raise EvalDataError(f"{path}: empty; expected {expected}")
    if cut and cut_lines is not None:
        cut_lines[str(path)] = cut
    return lines
