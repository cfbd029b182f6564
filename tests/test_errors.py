"""Tests for infoxlm.errors: the one-line error for a file that cannot be opened or decoded."""

from __future__ import annotations

import errno

import pytest

from infoxlm.errors import DataError, InfoXLMError, file_error


@pytest.mark.parametrize(
    "exc, message",
    [
        (FileNotFoundError(errno.ENOENT, "No such file or directory"), "f.txt: no such file; expected a text file"),
        (IsADirectoryError(errno.EISDIR, "Is a directory"), "f.txt: is a directory; expected a text file"),
        (PermissionError(errno.EACCES, "Permission denied"), "f.txt: cannot open (Permission denied); expected a text file"),
        (UnicodeDecodeError("utf-8", b"ab\xff", 2, 3, "invalid start byte"), "f.txt: not UTF-8 (byte 2); expected a text file"),
    ],
)
def test_each_way_a_file_fails_to_open_is_one_line_naming_it(exc, message):
    error = file_error("f.txt", exc, "a text file", DataError)
    assert isinstance(error, DataError) and str(error) == message


def test_the_error_type_defaults_to_the_base_every_command_prints_on_one_line():
    assert type(file_error("f", FileNotFoundError(errno.ENOENT, "x"), "a file")) is InfoXLMError
