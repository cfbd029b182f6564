"""Tests for infoxlm.json_files: a small file is read only when it is a regular file of the
size its kind has, and its JSON is parsed into one line naming the file when it is bad."""

from __future__ import annotations

import os
import sys

import pytest

from hostile_files import DEEP_JSON, fifo, within, zero_link

from infoxlm.errors import CheckpointError, InfoXLMError
from infoxlm.json_files import CONFIG_BYTES, MAX_DEPTH, parse_json, read_json, read_small_file

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="named pipes and /dev/zero")


def refusal(path, **options) -> str:
    with within(10), pytest.raises(InfoXLMError) as caught:
        read_json(path, what="a config.json", max_bytes=options.pop("max_bytes", CONFIG_BYTES), **options)
    message = str(caught.value)
    assert message.startswith(f"{path}:") and "; expected a config.json" in message, message
    assert len(message.splitlines()) == 1
    return message


def test_a_regular_file_is_read(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 768, "layers": [[1, 2], {"a": null}]}\n', encoding="utf-8")
    assert read_json(path, what="a config.json", max_bytes=CONFIG_BYTES) == {"hidden_size": 768, "layers": [[1, 2], {"a": None}]}


def test_a_link_to_a_regular_file_is_followed_unless_told_not_to(tmp_path):
    (tmp_path / "blob").write_text("[1]", encoding="utf-8")
    (tmp_path / "config.json").symlink_to("blob")  # as a Hugging Face cache links its files
    assert read_json(tmp_path / "config.json", what="a config.json", max_bytes=CONFIG_BYTES) == [1]
    assert "is a symbolic link (to blob), not followed" in refusal(tmp_path / "config.json", follow_links=False)


def test_a_link_to_dev_zero_is_refused_without_reading_it(tmp_path):
    zero_link(tmp_path / "config.json")
    assert "is a character device (a link to /dev/zero), not a regular file" in refusal(tmp_path / "config.json")


def test_a_named_pipe_is_refused_at_once(tmp_path):
    fifo(tmp_path / "config.json")
    assert "is a named pipe, not a regular file" in refusal(tmp_path / "config.json")


def test_a_directory_and_a_missing_file_are_named(tmp_path):
    (tmp_path / "config.json").mkdir()
    assert "is a directory" in refusal(tmp_path / "config.json")
    assert "no such file" in refusal(tmp_path / "absent.json")


def test_a_file_larger_than_its_kind_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "config.json"
    with open(path, "wb") as f:
        f.truncate(3_600_000_000)  # sparse: no disk used
    assert "holds 3.4 GiB; expected a config.json of at most 4 MiB" in refusal(path)
    path.write_bytes(b"[" + b" " * 100 + b"]")
    assert "holds 102 bytes; expected a config.json of at most 50 bytes" in refusal(path, max_bytes=50)


def test_the_callers_error_type_is_raised(tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        read_small_file(tmp_path / "x", what="a file", max_bytes=10, error=CheckpointError)


@pytest.mark.parametrize(
    "text, message",
    [
        (DEEP_JSON, "deep.json: invalid JSON (nested deeper than 100 levels)"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "deep.json: invalid JSON (nested deeper than 100 levels)"),
        ('{"a": 1,\n  "b": }', "deep.json:2:8: invalid JSON (Expecting value)"),
        ('{"a": "\xff"}'.encode("latin-1"), "deep.json:1:8: not UTF-8 (byte 0xff)"),
    ],
    ids=["100,000 deep", "101 deep", "not JSON", "not UTF-8"],
)
def test_bad_json_is_one_line_naming_the_file_line_and_column(tmp_path, text, message):
    path = tmp_path / "deep.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert refusal(path) == f"{tmp_path}/{message}; expected a config.json"


def test_json_as_deep_as_the_limit_is_read():
    expected: list = []
    for _ in range(MAX_DEPTH - 1):
        expected = [expected]
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x.json", what="a list") == expected


def test_a_line_of_json_lines_is_named_by_its_number():
    with pytest.raises(InfoXLMError, match=r"^x\.jsonl:7: invalid JSON \(nested deeper than 100 levels\); expected one object$"):
        parse_json(DEEP_JSON, "x.jsonl", what="one object", line=7)
    with pytest.raises(InfoXLMError, match=r"^x\.jsonl:7:4: invalid JSON \(Expecting value\)"):
        parse_json("[1,", "x.jsonl", what="one object", line=7)


def test_a_byte_order_mark_is_skipped(tmp_path):
    path = tmp_path / "c.json"
    path.write_bytes(b"\xef\xbb\xbf{}")
    assert read_json(path, what="a config.json", max_bytes=CONFIG_BYTES) == {}
