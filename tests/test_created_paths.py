"""What a failed command created is taken back; a failed system call names the place."""

from __future__ import annotations

import errno

import pytest

from infoxlm.created_paths import CreatedPaths, naming


def test_a_failure_removes_what_was_created_and_a_failed_write_names_the_place(tmp_path):
    with pytest.raises(OSError) as caught:
        with CreatedPaths(tmp_path / "store") as created:
            created.mkdir(tmp_path / "store" / "mono")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert caught.value.filename == str(tmp_path / "store")
    assert not (tmp_path / "store").exists()


def test_an_error_that_is_no_system_call_keeps_its_own_words(tmp_path):
    # pyarrow's errors for a damaged input file are OSErrors with errno None: naming the output
    # store on them said "STORE: [Errno None] None" and dropped pyarrow's reason.
    damaged = OSError("Couldn't deserialize thrift: TProtocolException: Invalid data")
    for block in (CreatedPaths(tmp_path / "store"), naming(tmp_path / "file")):
        with pytest.raises(OSError) as caught:
            with block:
                raise damaged
        assert caught.value.filename is None and "deserialize thrift" in str(caught.value)
