"""Tests for infoxlm.data.corpus_lock: a partial corpus is stale exactly when its lock is free."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from infoxlm.data.corpus_lock import PARTIAL_PREFIX, corpus_lock, partial_corpus_dirs, remove_stale_partials
from infoxlm.corpus.store_writer import create_or_open_store
from infoxlm.data.store import StoreError, TokenStore
from test_store import IDENTITY, write_mono

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="corpus locks need fcntl")


@pytest.fixture
def store_root(tmp_path):
    root = tmp_path / "store"
    create_or_open_store(root, IDENTITY)
    return root


# A prepare on another host (or in another PID namespace): it holds its corpus's lock until
# its stdin closes; the PID in its partial directory's name means nothing here.
HOLD_CORPUS_LOCK = """
import sys
from infoxlm.data.corpus_lock import corpus_lock
with corpus_lock(sys.argv[1], sys.argv[2], sys.argv[3]):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def remote_writer(store_root):
    """A live writer of parallel/en-fr whose recorded PID does not exist on this host."""
    partial = store_root / "parallel" / f"{PARTIAL_PREFIX}en-fr-999999998"
    partial.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_CORPUS_LOCK, str(store_root), "parallel", "en-fr"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    yield partial, holder
    holder.kill()
    holder.wait()


def test_a_partial_is_stale_exactly_when_its_corpus_lock_is_free(store_root, remote_writer):
    write_mono(store_root)
    live, holder = remote_writer
    with pytest.raises(ProcessLookupError):
        os.kill(999999998, 0)  # by its PID alone it would look dead
    dead = store_root / "mono" / f"{PARTIAL_PREFIX}fr-{os.getppid()}"  # a PID that runs, a lock no one holds
    dead.mkdir()
    store = TokenStore.open(store_root)
    assert set(store.partial_corpora()) == {dead, live}
    assert "fr" not in store.mono  # a partial directory is never a corpus
    with pytest.raises(StoreError, match=rf"en-fr-999999998: being prepared by process {holder.pid} "
                       rf"\(on host {socket.gethostname()}\); wait for it to finish"):  # fmt: skip
        store.verify()
    assert remove_stale_partials(store_root) == [dead]
    assert partial_corpus_dirs(store_root) == [live]
    holder.kill()
    holder.wait()  # the writer died: its directory is stale now
    with pytest.raises(StoreError, match="en-fr-999999998: left by an interrupted or failed prepare"):
        store.verify()
    assert remove_stale_partials(store_root) == [live]


def test_a_corpus_moved_aside_by_a_commit_is_live_while_its_writer_holds_the_lock(store_root):
    aside = store_root / "mono" / f"{PARTIAL_PREFIX}old-de-1"
    aside.mkdir(parents=True)
    with corpus_lock(store_root, "mono", "de"):
        assert remove_stale_partials(store_root) == []
        assert remove_stale_partials(store_root, holding=("mono", "de")) == [aside]  # the caller's own
