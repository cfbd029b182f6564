"""Tests for infoxlm.train.run_lock: one command at a time in a run directory."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from local_ports import free_port
from test_loop import structured_store

from infoxlm.cli import main
from infoxlm.file_lock import exclusive_lock
from infoxlm.train.checkpoint import list_checkpoints
from infoxlm.train.distributed import World
from infoxlm.train.errors import TrainingError
from infoxlm.train.run_lock import LOCK_FILE, RunLock


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder``: relative path → (SHA-256 of its bytes, mtime in ns)."""
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return structured_store(tmp_path_factory.mktemp("run_lock") / "store")


def test_a_second_hold_is_refused_naming_the_holder_until_the_first_is_released(tmp_path):
    run = tmp_path / "run"
    first = RunLock.acquire(run, World())
    note = (run / LOCK_FILE).read_text()
    holder = f"process {os.getpid()} (on host {socket.gethostname()})"
    with pytest.raises(TrainingError) as refused:
        RunLock.acquire(run, World())  # a second hold, even in the same process
    assert str(refused.value) == (
        f"{run}: another infoxlm pretrain is running in it ({holder}, holding {run / LOCK_FILE}); "
        "wait for it to end, or use another --output"
    )
    assert (run / LOCK_FILE).read_text() == note  # the refused one wrote nothing
    first.release()
    RunLock.acquire(run, World()).release()  # free again


def test_a_command_that_cannot_start_leaves_nothing_behind(tmp_path):
    RunLock.acquire(tmp_path / "new" / "run", World()).release(started=False)
    assert list(tmp_path.iterdir()) == []
    # A run directory that was there keeps its lock file (the next start writes its holder in it).
    run = tmp_path / "run"
    RunLock.acquire(run, World()).release()
    RunLock.acquire(run, World()).release(started=False)
    assert [p.name for p in run.iterdir()] == [LOCK_FILE]


def test_a_lock_file_that_is_a_symbolic_link_is_refused_and_its_target_kept(tmp_path):
    precious = tmp_path / "precious"
    precious.write_text("a user's data\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).symlink_to(precious)  # left by anyone who may write into RUN
    with pytest.raises(TrainingError) as refused:
        RunLock.acquire(run, World())
    assert str(refused.value).startswith(f"{run / LOCK_FILE}: is a symbolic link (to {precious}), not a regular file; ")
    assert precious.read_text() == "a user's data\n" and (run / LOCK_FILE).is_symlink()


# A pretrain killed at once (on this host or another): its lock file stays, naming it.
HOLD_AND_DIE = """
import os, signal, sys
from infoxlm.file_lock import exclusive_lock
with exclusive_lock(sys.argv[1]):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _left_by_a_killed_pretrain(run: Path) -> None:
    run.mkdir()
    subprocess.run([sys.executable, "-c", HOLD_AND_DIE, str(run / LOCK_FILE)], check=False)
    assert [p.name for p in run.iterdir()] == [LOCK_FILE] and '"pid"' in (run / LOCK_FILE).read_text()


def _pretrain_argv(store: Path, run: Path, *extra: str) -> list[str]:
    return ["pretrain", "--preset", "test", "--data", str(store), "--output", str(run), "--no-progress", *extra]


def test_a_run_directory_holding_only_a_dead_pretrains_lock_starts(store, tmp_path, capsys):
    run = tmp_path / "run"
    _left_by_a_killed_pretrain(run)
    code = main(_pretrain_argv(store, run, "--max-steps", "1"))
    assert code == 0, capsys.readouterr().err
    assert [step for step, _ in list_checkpoints(run)] == [1]
    assert f'"pid": {os.getpid()}' in (run / LOCK_FILE).read_text()


def test_a_pretrain_starting_in_the_same_new_directory_is_named_as_its_holder(store, tmp_path, capsys):
    run = tmp_path / "run"
    with exclusive_lock(run / LOCK_FILE):  # another pretrain that has just taken RUN, and written nothing else yet
        code = main(_pretrain_argv(store, run, "--max-steps", "1"))
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and lines == [
        f"infoxlm: error: {run}: another infoxlm pretrain is running in it (process {os.getpid()} "
        f"(on host {socket.gethostname()}), holding {run / LOCK_FILE}); wait for it to end, or use another --output"
    ]
    assert [p.name for p in run.iterdir()] == [LOCK_FILE]


def _start_pretrain(store: Path, run: Path) -> subprocess.Popen:
    argv = _pretrain_argv(store, run, "--max-steps", "100000", "--save-every", "2")
    return subprocess.Popen([sys.executable, "-m", "infoxlm", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # a training subprocess
def test_a_pretrain_killed_at_start_up_is_started_again_by_the_same_command(store, tmp_path, capsys):
    run = tmp_path / "run"
    first = _start_pretrain(store, run)
    deadline = time.monotonic() + 180
    while not (run / LOCK_FILE).exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    first.kill()  # SIGKILL: nothing is cleaned up
    first.communicate()
    assert (run / LOCK_FILE).exists(), "the first pretrain took no lock"
    code = main(_pretrain_argv(store, run, "--max-steps", "2", "--save-every", "2"))
    assert code == 0, capsys.readouterr().err
    assert [step for step, _ in list_checkpoints(run)][-1] == 2


@pytest.mark.slow  # two training subprocesses
def test_of_two_pretrains_started_together_the_loser_names_the_winner(store, tmp_path):
    run = tmp_path / "run"
    both = [_start_pretrain(store, run) for _ in range(2)]
    try:
        deadline = time.monotonic() + 180
        while all(p.poll() is None for p in both) and time.monotonic() < deadline:
            time.sleep(0.05)
        loser, winner = both if both[0].poll() is not None else both[::-1]
        lines = loser.communicate()[1].strip().splitlines()
        assert loser.returncode == 1 and len(lines) == 1, lines
        held = f"infoxlm: error: {run}: another infoxlm pretrain is running in it (process {winner.pid} (on host "
        assert lines[0].startswith(held), lines
    finally:
        for p in both:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=120)


@pytest.mark.slow  # a training subprocess
def test_a_second_pretrain_on_a_running_run_changes_nothing(store, tmp_path, capsys):
    run = tmp_path / "run"
    first = subprocess.Popen(
        [sys.executable, "-m", "infoxlm", *_pretrain_argv(store, run, "--max-steps", "100000", "--save-every", "2")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 180
        while not list_checkpoints(run) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list_checkpoints(run), "the first run wrote no checkpoint"
        first.send_signal(signal.SIGSTOP)  # R holds still while it is compared (the lock stays held)
        time.sleep(0.5)  # a background checkpoint write, if any, is stopped too
        before = snapshot(run)
        code = main(_pretrain_argv(store, run, "--max-steps", "100000", "--set", "run.seed=1"))
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert code == 1 and len(lines) == 1, err
        assert lines[0].startswith(f"infoxlm: error: {run}: another infoxlm pretrain is running in it (process {first.pid} (on host")
        assert snapshot(run) == before  # not a byte, not an mtime
    finally:
        first.send_signal(signal.SIGCONT)
        first.send_signal(signal.SIGTERM)
        _, first_err = first.communicate(timeout=120)
    assert first.returncode == 0, first_err.decode()[-2000:]


def _hold_on_two_ranks(rank: int, port: int, run: str, answers) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        RunLock.acquire(Path(run), World(rank=rank, size=2))
        answers[rank] = None
    except TrainingError as err:
        answers[rank] = str(err)
    dist.destroy_process_group()


@pytest.mark.slow  # two processes
def test_rank_0_alone_locks_and_every_rank_stops_with_its_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    answers = mp.Manager().dict()
    with exclusive_lock(run / LOCK_FILE):  # another command's hold
        mp.spawn(_hold_on_two_ranks, args=(free_port(), str(run), answers), nprocs=2, join=True)
    assert answers[0] == answers[1] and f"another infoxlm pretrain is running in it (process {os.getpid()}" in answers[0]
    mp.spawn(_hold_on_two_ranks, args=(free_port(), str(run), answers), nprocs=2, join=True)
    assert answers[0] is None and answers[1] is None  # free: rank 0 holds it, rank 1 has nothing to hold
