"""scripts/slurm/pretrain.sbatch under a stand-in for SLURM: SIGUSR1 before the time limit ends
the job with a checkpoint and exit 0, nothing left running; a dead torchrun leaves no workers.

The stand-in plays one node: `scontrol` names 127.0.0.1, `srun` runs its task here and passes a
signal on either to the task (as proctrack/pgid does) or to every process of the step (as
proctrack/cgroup does), and SLURM_* variables describe a job of one node with 2 "GPUs" (two
CPU processes over gloo). Every process the job starts carries its SLURM_JOB_ID, which is how
the tests find them in /proc.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from local_ports import free_port
from test_loop import structured_store

from infoxlm.train.checkpoint import list_checkpoints
from infoxlm.train.config import apply_overrides
from infoxlm.train.loop import pretrain
from infoxlm.train.presets import preset

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the job's processes through /proc"),
]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm" / "pretrain.sbatch"
OPTIONS = ["--preset", "test", "--device", "cpu", "--max-steps", "100000", "--save-every", "100000", "--set", "run.log_every=1"]

SCONTROL = """#!/bin/bash
echo 127.0.0.1
"""

# srun: skip its options, run the task, pass SIGUSR1 on as $SRUN_DELIVERS says, exit with the
# task's status.
SRUN = """#!/bin/bash
while [[ $1 == -* ]]; do shift; done
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
if [[ $SRUN_DELIVERS == step ]]; then
    trap 'kill -USR1 $(descendants $$) 2>/dev/null' USR1
else
    trap 'kill -USR1 "$task"' USR1
fi
"$@" &
task=$!
while kill -0 "$task" 2>/dev/null; do wait "$task" || true; done
wait "$task"
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """(store, init, bin): a token store, a run to continue from (--init), the fake commands."""
    root = tmp_path_factory.mktemp("slurm")
    store = structured_store(root / "store")
    with contextlib.redirect_stdout(io.StringIO()):
        init = pretrain(apply_overrides(preset("test"), ["optim.max_steps=1"]), store, root / "init", progress=False)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, text in (("scontrol", SCONTROL), ("srun", SRUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return store, init, bin_dir


class Job:
    """The batch script started as SLURM starts it, its output in ``log``."""

    def __init__(self, slurm, run: Path, *extra: str, delivers: str = "task"):
        store, init, bin_dir = slurm
        self.job_id = f"{os.getpid()}{free_port()}"
        env = {
            **os.environ,
            "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
            "SLURM_JOB_ID": self.job_id,
            "SLURM_JOB_NODELIST": "localhost",
            "SLURM_NNODES": "1",
            "SLURM_NODEID": "0",
            "SLURM_GPUS_ON_NODE": "2",
            "MASTER_PORT": str(free_port()),
            "SRUN_DELIVERS": delivers,
        }
        self.log = run.parent / f"{run.name}.log"
        argv = ["bash", str(SCRIPT), str(run), str(store), str(init), *OPTIONS, *extra]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def processes(self) -> dict[int, str]:
        """pid → command line of every live process of this job (torchrun's workers run in
        sessions of their own, so the job's variable finds them, not the session)."""
        found = {}
        mark = f"SLURM_JOB_ID={self.job_id}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                zombie = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
            except OSError:
                continue
            if mark in environ.split(b"\0") and not zombie:
                found[int(entry.name)] = cmdline
        return found

    def workers(self) -> list[int]:
        return [pid for pid, cmd in self.processes().items() if " -m infoxlm pretrain " in cmd and "torch.distributed.run" not in cmd]

    def wait_for_steps(self, run: Path, steps: int = 3) -> None:
        deadline = time.time() + 180
        metrics = run / "metrics.jsonl"
        while time.time() < deadline and self.proc.poll() is None:
            if metrics.is_file() and len(metrics.read_text().splitlines()) >= steps:
                return
            time.sleep(0.1)
        raise AssertionError(f"no training steps logged; batch script status {self.proc.poll()}\n{self.text()[-3000:]}")

    def gone_within(self, seconds: float) -> float:
        """Seconds until no process of the job is left (fails after ``seconds``)."""
        start = time.monotonic()
        while self.processes() and time.monotonic() - start < seconds:
            time.sleep(0.1)
        left = self.processes()
        assert not left, f"still running after {seconds} s: {left}\n{self.text()[-3000:]}"
        return time.monotonic() - start

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()


@pytest.mark.parametrize("delivers", ["task", "step"])
def test_sigusr1_to_the_batch_shell_ends_the_job_with_a_checkpoint_and_status_0(slurm, tmp_path, delivers):
    run = tmp_path / "run"
    job = Job(slurm, run, delivers=delivers)
    try:
        job.wait_for_steps(run)
        assert len(job.workers()) == 2, job.processes()
        start = time.monotonic()
        job.proc.send_signal(signal.SIGUSR1)  # what --signal=B:USR1@120 does
        status = job.proc.wait(timeout=180)
        gone = time.monotonic() - start + job.gone_within(30)
    finally:
        job.kill()
    print(f"\nSIGUSR1 ({delivers}) → every process gone: {gone:.1f} s")
    out = job.text()
    assert status == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    steps = [step for step, _ in list_checkpoints(run)]
    assert len(steps) == 1 and 3 <= steps[0] < 100000, steps
    assert f"stopped after step {steps[0]} " in out and "(SIGUSR1 received)" in out, out[-3000:]

    if delivers == "task":  # the same job submitted again continues from that checkpoint
        again = Job(slurm, run, "--stop-at", str(steps[0] + 1))
        try:
            status = again.proc.wait(timeout=300)
            again.gone_within(30)
        finally:
            again.kill()
        out = again.text()
        assert status == 0, out[-3000:]
        assert f"resuming {run} from " in out and f"(step {steps[0]})" in out, out[-3000:]
        assert [step for step, _ in list_checkpoints(run)][-1] == steps[0] + 1


def test_workers_stop_when_torchrun_dies(slurm, tmp_path):
    run = tmp_path / "run"
    job = Job(slurm, run)
    try:
        job.wait_for_steps(run)
        torchrun = [pid for pid, cmd in job.processes().items() if "torch.distributed.run" in cmd and "bash" not in cmd]
        assert len(torchrun) == 1, job.processes()
        start = time.monotonic()
        os.kill(torchrun[0], signal.SIGKILL)
        gone = job.gone_within(60)
        status = job.proc.wait(timeout=10)
    finally:
        job.kill()
    print(f"\ntorchrun SIGKILLed → every process gone: {gone:.1f} s")
    out = job.text()
    assert status == 128 + signal.SIGKILL, out[-3000:]  # torchrun's own status, passed on
    # The workers had SIGTERM from Linux and stopped as a scheduler's SIGTERM stops them.
    steps = [step for step, _ in list_checkpoints(run)]
    assert len(steps) == 1 and 3 <= steps[0] < 100000, (steps, out[-3000:])
    assert f"stopped after step {steps[0]} " in out and "(SIGTERM received)" in out, out[-3000:]
    assert time.monotonic() - start < 60
