"""One side of `infoxlm mine`: every format prepare reads, distinct non-blank sentences, one-line errors."""

from __future__ import annotations

import gzip
import json

import pytest

from infoxlm.errors import DataError
from infoxlm.eval.mining_text import mining_inputs, read_side

def read(path, flag="--src", field=None, **kwargs):
    """One side as infoxlm mine reads it, the other side a text file."""
    other = path.with_name("other.txt")
    other.write_text("x\n", encoding="utf-8")
    src, _, fields = mining_inputs(str(path), str(other), field)
    return read_side(src, fields, flag, **kwargs)


LINES = ["Hallo Welt.", "", "Guten Tag.", "Hallo Welt.", "  ", "Bis bald."]
EXPECTED = ["Hallo Welt.", "Guten Tag.", "Bis bald."]


def write_formats(tmp_path):
    text = "".join(line + "\n" for line in LINES)
    (tmp_path / "de.txt").write_text(text, encoding="utf-8")
    (tmp_path / "de.txt.gz").write_bytes(gzip.compress(text.encode()))
    zstandard = pytest.importorskip("zstandard")
    (tmp_path / "de.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    records = "".join(json.dumps({"id": i, "sentence": line}) + "\n" for i, line in enumerate(LINES))
    (tmp_path / "de.jsonl").write_text(records, encoding="utf-8")
    (tmp_path / "de.jsonl.gz").write_bytes(gzip.compress(records.encode()))
    return tmp_path


@pytest.mark.parametrize(("name", "field"), [("de.txt", None), ("de.txt.gz", None), ("de.txt.zst", None),
                                             ("de.jsonl", "sentence"), ("de.jsonl.gz", "sentence")])
def test_every_format_gives_the_same_distinct_sentences(tmp_path, name, field):
    side = read(write_formats(tmp_path) / name, field=field)
    assert side.texts == EXPECTED
    assert (side.lines, side.blank, side.repeated, side.cut) == (6, 2, 1, 0)
    assert side.digest == read(tmp_path / "de.txt").digest


def test_lines_are_kept_as_written_and_crlf_ends_a_line(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes("\ufeff a \r\nÄ\u0308 \n a\n".encode())  # BOM, CRLF, a combining mark, spaces kept
    assert read(path).texts == [" a ", "Ä\u0308 ", " a"]


def test_the_digest_tells_other_sentences_apart(tmp_path):
    (tmp_path / "a.txt").write_text("eins\nzwei\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("zwei\neins\n", encoding="utf-8")
    assert read(tmp_path / "a.txt").digest != read(tmp_path / "b.txt").digest


def test_a_long_line_is_cut_and_counted(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("kurz\n" + "x" * 200_000 + "\n", encoding="utf-8")
    side = read(path, max_length=16)
    assert side.cut == 1 and side.texts[0] == "kurz" and len(side.texts[1]) < 200_000


@pytest.mark.parametrize(("content", "field", "message"), [
    (b"", None, "no sentence to mine (it is empty); expected --src to hold one sentence a line"),
    (b"\n  \n\n", None, "no sentence to mine (its 3 lines are all blank)"),
    (b"gut\n\xff\xfe\n", None, ":2: invalid UTF-8 at byte 1"),
    (b"gut\n", "sentence", "--field names a field of record inputs"),
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, content, field, message):
    path = tmp_path / "de.txt"
    path.write_bytes(content)
    with pytest.raises(DataError) as err:
        read(path, field=field)
    assert message in str(err.value) and "\n" not in str(err.value) and str(path) in str(err.value)


def test_a_record_without_the_field_is_named(tmp_path):
    path = tmp_path / "de.jsonl"
    path.write_text('{"text": "eins"}\n{"satz": "zwei"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"de.jsonl:2: no field 'text'"):
        read(path)


def test_a_missing_input_is_named_with_its_flag(tmp_path):
    with pytest.raises(DataError, match="no such file or directory; expected --tgt to name an input"):
        mining_inputs(str(write_formats(tmp_path) / "de.txt"), str(tmp_path / "nope.txt"))


def test_one_file_named_twice_is_refused(tmp_path):
    (tmp_path / "de.txt").write_text("eins\n", encoding="utf-8")
    with pytest.raises(DataError, match="--src and --tgt both name"):
        mining_inputs(str(tmp_path / "de.txt"), str(tmp_path / ".." / tmp_path.name / "de.txt"))


def test_the_field_applies_to_the_side_with_records(tmp_path):
    (tmp_path / "de.jsonl").write_text('{"satz": "eins"}\n', encoding="utf-8")
    (tmp_path / "en.txt").write_text("one\n", encoding="utf-8")
    src, tgt, fields = mining_inputs(str(tmp_path / "de.jsonl"), str(tmp_path / "en.txt"), "satz")
    assert read_side(src, fields, "--src").texts == ["eins"] and read_side(tgt, fields, "--tgt").texts == ["one"]
