"""Tests for infoxlm.file_lock: locks that name their holder and die with it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

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
