"""Tests for infoxlm.corpus.remote_inputs: fsspec URLs listed, copied whole, kept when unchanged,
and every bad URL one line naming it. Served by fsspec's in-memory filesystem (``memory://``)
and ``file://``; s3://, gs:// and hf:// go through the same calls with their packages."""

from __future__ import annotations

import os

import pytest

fsspec = pytest.importorskip("fsspec")

from infoxlm.corpus.remote_inputs import is_url, list_objects, stage_object, staged_path  # noqa: E402
from infoxlm.errors import DataError  # noqa: E402


@pytest.fixture
def memory():
    """fsspec's memory filesystem with /bucket/a.txt, /bucket/b.txt.gz and /bucket/sub/; emptied after."""
    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/a.txt", b"eins\nzwei\n")
    fs.pipe("/bucket/b.txt.gz", b"\x1f\x8b not really gzip")
    fs.pipe("/bucket/sub/c.txt", b"drei\n")
    yield fs
    fs.rm("/bucket", recursive=True)


def test_urls_are_told_from_paths():
    assert is_url("s3://b/k") and is_url("memory://x") and is_url("hf://datasets/o/n/f.txt")
    assert not is_url("de.txt") and not is_url("hf:wikitext") and not is_url(None)


def test_a_url_lists_its_object_and_a_glob_its_matches_in_order(memory):
    (one,) = list_objects("memory://bucket/a.txt")
    assert one.url == "memory://bucket/a.txt" and one.size == 10 and one.version
    # A match is named as fsspec spells it: the protocol and the path it lists.
    assert [o.url for o in list_objects("memory://bucket/*.txt*")] == ["memory:///bucket/a.txt", "memory:///bucket/b.txt.gz"]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("memory://bucket/missing.txt", "memory://bucket/missing.txt: no such object; expected an input file"),
        ("memory://bucket/*.zst", "memory://bucket/*.zst: matches no object; expected a glob"),
        ("memory://bucket/sub", "memory://bucket/sub: a directory; expected an input file"),
        ("nosuchscheme://bucket/a.txt", "nosuchscheme://bucket/a.txt: no filesystem for nosuchscheme://"),
    ],
)
def test_a_bad_url_is_one_line_naming_it(memory, spec, message):
    with pytest.raises(DataError) as err:
        list_objects(spec)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_copy_keeps_the_name_and_time_and_is_reused_while_unchanged(memory, tmp_path):
    (obj,) = list_objects("memory://bucket/b.txt.gz")
    copy = stage_object(obj, tmp_path)
    assert copy == staged_path(obj, tmp_path) and copy.name == "b.txt.gz"  # the suffix says how it is compressed
    assert copy.read_bytes() == memory.cat("/bucket/b.txt.gz")
    assert copy.stat().st_mtime_ns == obj.mtime_ns  # the same fingerprint wherever it is copied
    assert [p.name for p in copy.parent.iterdir()] == ["b.txt.gz"]  # no temporary left
    memory.rm("/bucket/b.txt.gz")
    assert stage_object(obj, tmp_path) == copy  # kept: not read again


def test_an_object_changed_or_gone_since_it_was_listed_is_refused(memory, tmp_path):
    (obj,) = list_objects("memory://bucket/a.txt")
    memory.pipe("/bucket/a.txt", b"eins\nzwei\ndrei\n")
    with pytest.raises(DataError, match=r"memory://bucket/a.txt: 15 bytes read but 10 listed; expected the object unchanged"):
        stage_object(obj, tmp_path)
    memory.rm("/bucket/a.txt")
    with pytest.raises(DataError, match=r"memory://bucket/a.txt: no such object \(gone since the job was launched\)"):
        stage_object(obj, tmp_path)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_file_urls_are_read_like_any_other(tmp_path):
    (tmp_path / "de.txt").write_text("Hallo\n", encoding="utf-8")
    (obj,) = list_objects(f"file://{tmp_path}/de.txt")
    copy = stage_object(obj, tmp_path / "inputs")
    assert copy.read_text(encoding="utf-8") == "Hallo\n"
    assert copy.stat().st_mtime_ns == obj.mtime_ns
    assert abs(obj.mtime_ns - (tmp_path / "de.txt").stat().st_mtime_ns) < 1000  # fsspec reports float seconds
    assert os.path.commonpath([copy, tmp_path / "inputs"]) == str(tmp_path / "inputs")
