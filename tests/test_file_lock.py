"""Tests for infoxlm.file_lock: locks that name their holder and die with it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from infoxlm.errors import InfoXLMError
from infoxlm.file_lock import LockHeld, LockHolder, exclusive_lock, lock_if_free

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock needs fcntl")

# Another process (a job on another host, as far as the lock can tell): holds the lock until
# its stdin closes, after saying so.
HOLD = """
import sys
from infoxlm.file_lock import exclusive_lock
with exclusive_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def hold_in_a_subprocess(path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_held_lock_names_its_holder_and_goes_with_its_process(tmp_path):
    path = tmp_path / "locks" / "corpus"
    holder = hold_in_a_subprocess(path)
    try:
        with lock_if_free(path) as found:
            assert found == LockHolder(holder.pid, socket.gethostname())
        assert found.describe() == f"process {holder.pid} (on host {socket.gethostname()})"
        with pytest.raises(LockHeld, match=f"held by process {holder.pid}"):
            with exclusive_lock(path, wait=False):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)  # dies without cleaning up: the lock goes anyway
        holder.wait()
    with lock_if_free(path) as found:
        assert found is None
    with exclusive_lock(path, wait=False):
        assert f'"pid": {os.getpid()}' in path.read_text()


def test_a_second_lock_in_the_same_process_is_refused(tmp_path):
    path = tmp_path / "lock"
    with exclusive_lock(path):
        with pytest.raises(LockHeld):
            with exclusive_lock(path, wait=False):
                pass
        with lock_if_free(path) as found:
            assert found == LockHolder(os.getpid(), socket.gethostname())


def test_a_missing_lock_file_is_free_and_not_created_by_looking(tmp_path):
    with lock_if_free(tmp_path / "nothing") as found:
        assert found is None
    assert not (tmp_path / "nothing").exists()


def test_a_probe_keeps_a_writer_waiting_until_it_ends(tmp_path):
    path = tmp_path / "lock"
    path.touch()
    with lock_if_free(path) as found:
        assert found is None
        with pytest.raises(LockHeld):  # a writer cannot start while the probe holds it
            with exclusive_lock(path, wait=False):
                pass
    with exclusive_lock(path, wait=False):
        pass


# What others can leave at a lock's path in a shared directory: never followed, never written.
PRECIOUS = "a user's data\n"


def _symbolic_link(lock, precious):
    lock.symlink_to(precious)


def _hard_link(lock, precious):
    os.link(precious, lock)


def _foreign_file(lock, precious):
    lock.write_text(PRECIOUS)


def _directory(lock, precious):
    lock.mkdir()


def _named_pipe(lock, precious):
    os.mkfifo(lock)  # opening it for reading would wait for a writer


@pytest.mark.parametrize(
    "make, said",
    [
        (_symbolic_link, "is a symbolic link (to {precious}), not a regular file"),
        (_hard_link, "holds something other than a lock's record (14 bytes)"),
        (_foreign_file, "holds something other than a lock's record (14 bytes)"),
        (_directory, "is a directory, not a regular file"),
        (_named_pipe, "is a named pipe, not a regular file"),
    ],
)
def test_what_is_not_a_lock_file_is_refused_in_one_line_and_left_as_it_is(tmp_path, make, said):
    precious = tmp_path / "precious"
    precious.write_text(PRECIOUS)
    lock = tmp_path / "shared" / ".lock"
    lock.parent.mkdir()
    make(lock, precious)
    with pytest.raises(InfoXLMError) as refused:
        with exclusive_lock(lock, wait=False):
            pass
    assert str(refused.value) == (
        f"{lock}: {said.format(precious=precious)}; expected a lock file "
        "(a regular file holding its holder's process id and host, or nothing); nothing was written to it"
    )
    assert precious.read_text() == PRECIOUS
    # A probe answers at once; what it cannot open as a regular file it takes as held.
    not_regular = make in (_symbolic_link, _directory, _named_pipe)
    with lock_if_free(lock) as found:
        assert found == (LockHolder() if not_regular else None)
    assert precious.read_text() == PRECIOUS


def test_a_dangling_symbolic_link_creates_nothing_where_it_points(tmp_path):
    lock = tmp_path / ".lock"
    lock.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InfoXLMError, match="is a symbolic link"):
        with exclusive_lock(lock, wait=False):
            pass
    assert not (tmp_path / "elsewhere").exists() and lock.is_symlink()


def test_a_lock_says_whether_it_made_its_file_and_takes_over_a_dead_holders_record(tmp_path):
    path = tmp_path / "lock"
    with exclusive_lock(path) as created:
        assert created
    holder = hold_in_a_subprocess(path)
    holder.send_signal(signal.SIGKILL)  # its record stays behind, naming a process that is gone
    holder.wait()
    assert f'"pid": {holder.pid}' in path.read_text()
    with exclusive_lock(path, wait=False) as created:
        assert not created and f'"pid": {os.getpid()}' in path.read_text()
    path.write_text("")  # a holder killed between making the file and writing its record
    with exclusive_lock(path, wait=False) as created:
        assert not created and f'"pid": {os.getpid()}' in path.read_text()
