"""Tests for infoxlm.train.distributed: a stuck rank ends the run with a message, not a hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from test_loop import structured_store

from infoxlm.train.config import ConfigError
from infoxlm.train.distributed import is_collective_timeout, local_cuda_index, restart_store_warning


def test_timeouts_are_recognised_in_either_backends_words():
    assert is_collective_timeout(RuntimeError("[gloo] Timed out waiting 3000ms for recv operation to complete"))
    assert is_collective_timeout(RuntimeError("Watchdog caught collective operation timeout: WorkNCCL(...)"))
    assert not is_collective_timeout(RuntimeError("CUDA out of memory"))
    assert not is_collective_timeout(ValueError("timed out"))


def test_each_process_takes_its_own_gpu_or_the_only_one_it_sees():
    assert [local_cuda_index(r, 8, None) for r in range(8)] == list(range(8))
    assert local_cuda_index(5, 1, "5") == 0  # the scheduler shows each process one GPU
    with pytest.raises(ConfigError, match=r"LOCAL_RANK=4, but this process sees 4 CUDA devices"):
        local_cuda_index(4, 4, "0,1,2,3")
    with pytest.raises(ConfigError, match=r"LOCAL_RANK=1, but this process sees 1 CUDA devices"):
        local_cuda_index(1, 1, None)  # two processes on a machine with one GPU


def test_workers_restarted_with_torchruns_shared_store_are_told_how_to_avoid_it():
    restarted = {"TORCHELASTIC_RESTART_COUNT": "1", "TORCHELASTIC_USE_AGENT_STORE": "True"}
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in restart_store_warning(restarted)
    assert restart_store_warning({**restarted, "TORCHELASTIC_USE_AGENT_STORE": "False"}) is None  # a store of its own
    assert restart_store_warning({**restarted, "TORCHELASTIC_RESTART_COUNT": "0"}) is None  # the first start
    assert restart_store_warning({}) is None  # not under torchrun


@pytest.mark.slow
def test_a_stuck_rank_ends_the_run_with_a_message(tmp_path):
    store = structured_store(tmp_path / "store")
    run = tmp_path / "run"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "infoxlm"]
    argv = [*torchrun, "pretrain", "--preset", "test", "--data", str(store), "--output", str(run), "--no-progress",
            "--max-steps", "100000", "--save-every", "100000", "--set", "run.log_every=1",
            "--set", "run.collective_timeout_s=5"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: list[int] = []
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (run / "metrics.jsonl").is_file():
            time.sleep(0.1)
        found = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        workers = sorted(int(pid) for pid in found)
        assert len(workers) == 2, found
        os.kill(workers[1], signal.SIGSTOP)  # one rank stops answering, as a hung process would
        _, err = proc.communicate(timeout=180)
    finally:
        for pid in workers:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        proc.kill()
    text = err.decode()
    assert proc.returncode != 0
    assert "waited run.collective_timeout_s=5 s for the other 1 process(es)" in text, text[-3000:]
