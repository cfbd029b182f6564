"""Tests for infoxlm.train.stopping: --stop-at, Ctrl-C, SIGTERM / SIGUSR1 end a run cleanly, resumable."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file
from local_ports import free_port
from test_loop import structured_store
from test_run_lock import snapshot

from infoxlm.cli import main
from infoxlm.train.checkpoint import latest_checkpoint, list_checkpoints
from infoxlm.train.config import apply_overrides
from infoxlm.train.distributed import World
from infoxlm.train.export import export
from infoxlm.train.loop import pretrain
from infoxlm.train.presets import preset
from infoxlm.train.stopping import RunStopped, StopRequest

OVERRIDES = ["optim.max_steps=8", "run.save_every=5", "model.dropout=0.1"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return structured_store(tmp_path_factory.mktemp("stopping") / "store")


def test_stop_at_leaves_a_checkpoint_and_the_same_call_continues_exactly(store, tmp_path, capsys):
    cfg = lambda: apply_overrides(preset("test"), OVERRIDES)  # noqa: E731
    with contextlib.redirect_stdout(io.StringIO()):
        pretrain(cfg(), store, tmp_path / "straight", progress=False)
        with pytest.raises(RunStopped) as stopped:  # a stopped run is never returned as a finished one
            pretrain(cfg(), store, tmp_path / "stopped", progress=False, stop_at=3)
        assert (stopped.value.step, stopped.value.max_steps, stopped.value.reason) == (3, 8, "--stop-at 3 reached")
        assert [step for step, _ in list_checkpoints(tmp_path / "stopped")] == [3]  # not a save_every step
        assert "stopped after step 3 of 8 (--stop-at 3 reached)" in capsys.readouterr().err
        pretrain(cfg(), store, tmp_path / "stopped", progress=False)  # the same call, no --stop-at
    assert latest_checkpoint(tmp_path / "stopped").name == "step-00000008"
    a = load_file(export(tmp_path / "straight", tmp_path / "a") / "model.safetensors")
    b = load_file(export(tmp_path / "stopped", tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_stop_at_the_run_has_reached_does_nothing(store, tmp_path, capsys):
    """A job re-submitted with its --stop-at must not advance the run a step each time."""
    run = tmp_path / "run"
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(RunStopped):
        pretrain(apply_overrides(preset("test"), OVERRIDES), store, run, progress=False, stop_at=4)
    capsys.readouterr()
    before = snapshot(run)
    argv = ["pretrain", "--preset", "test", "--data", str(store), "--output", str(run), "--no-progress"]
    argv += [a for o in OVERRIDES for a in ("--set", o)]
    for stop_at in ("4", "2"):
        assert main([*argv, "--stop-at", stop_at]) == 0
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines == [
            f"{run}: already at step 4, at or past --stop-at {stop_at}: nothing to do (step 4 of 8); "
            "the same command without --stop-at continues the run"
        ]
        assert snapshot(run) == before
    assert [step for step, _ in list_checkpoints(run)] == [4]


def test_a_stop_signal_is_remembered_until_the_step_boundary_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGUSR1)
    with StopRequest() as stop:
        assert stop.reached(1, World()) is None
        os.kill(os.getpid(), signal.SIGUSR1)  # handled in the main thread, between bytecodes
        assert stop.reached(2, World()) == "SIGUSR1 received"
    assert signal.getsignal(signal.SIGUSR1) is before
    assert StopRequest(stop_at=4).reached(3, World()) is None
    assert StopRequest(stop_at=4).reached(4, World()) == "--stop-at 4 reached"
    with pytest.raises(ValueError, match="stop_at must be an integer >= 1, got 0"):
        StopRequest(stop_at=0)


def _agree(rank: int, port: int, answers) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    stop = StopRequest()
    if rank == 0:
        stop.signal_name = "SIGTERM"  # the signal reached rank 0 only
    answers[rank] = stop.reached(5, World(rank=rank, size=2))
    dist.destroy_process_group()


@pytest.mark.slow
def test_ranks_agree_to_stop_when_one_of_them_got_the_signal():
    port = free_port()
    answers = mp.Manager().dict()
    mp.spawn(_agree, args=(port, answers), nprocs=2, join=True)
    assert answers[0] == "SIGTERM received"
    assert answers[1] == "a stop signal on another rank received"


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1])
def test_a_scheduler_signal_saves_a_checkpoint_and_exits_0(store, tmp_path, signum):
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "infoxlm", "pretrain", "--preset", "test", "--data", str(store), "--output", str(run),
            "--max-steps", "100000", "--save-every", "100000", "--no-progress", "--set", "run.log_every=1"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and not (run / "metrics.jsonl").is_file():
        time.sleep(0.05)
    time.sleep(0.5)  # a few steps in
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    steps = [step for step, _ in list_checkpoints(run)]
    assert len(steps) == 1 and 0 < steps[0] < 100000
    assert f"({signal.Signals(signum).name} received)" in err.decode()


# The demo preset at the scale of the tests (a tiny model, a few examples a step): seconds.
TINY_DEMO = ["model.size=tiny", "data.mmlm_batch_size=4", "data.tlm_batch_size=4", "data.xlco_batch_size=8",
             "data.block_size=32", "data.max_tokens=512", "contrast.queue_size=16", "run.log_every=1"]


def _demo_command(store, run, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "infoxlm", "pretrain", "--preset", "demo", "--data", str(store), "--output", str(run),
            "--max-steps", "60", "--no-progress", *extra]  # fmt: skip
    return argv + [a for o in TINY_DEMO for a in ("--set", o)]


def _interrupt_at(argv: list[str], run, step: int, presses: int) -> subprocess.CompletedProcess:
    """Start ``argv``, press Ctrl-C ``presses`` times once metrics.jsonl has ``step`` lines."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # As from a terminal, also when the tests run as a background job (SIGINT ignored).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    metrics, deadline = run / "metrics.jsonl", time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= step:
            break
        time.sleep(0.02)
    # stderr read as it comes, so that a second press waits until the run has taken the first:
    # two signals that arrive before Python's handler runs are one to it.
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    for press in range(presses):
        proc.send_signal(signal.SIGINT)
        taken = time.time() + 30
        while press + 1 < presses and time.time() < taken and not any("Ctrl-C: stopping" in line for line in lines):
            time.sleep(0.01)
    out = proc.stdout.read()
    proc.wait(timeout=180)
    reader.join(timeout=30)
    return subprocess.CompletedProcess(argv, proc.returncode, out, "".join(lines))


def _ctrl_c_then_resume(store, run):
    """`infoxlm pretrain --preset demo … --max-steps 60`, Ctrl-C at step ~17: exit 0, a
    checkpoint of that step (the demo saves every 100 steps: none of its own before 60), and
    the same command continues from it to the last step."""
    stopped = _interrupt_at(_demo_command(store, run), run, step=17, presses=1)
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    steps = [step for step, _ in list_checkpoints(run)]
    assert len(steps) == 1 and 17 <= steps[0] < 60, (steps, stopped.stderr[-3000:])
    assert "Ctrl-C: stopping after this step with a checkpoint" in stopped.stderr
    assert f"stopped after step {steps[0]} of 60 (Ctrl-C received)" in stopped.stderr
    assert "the same command continues the run" in stopped.stderr

    resumed = subprocess.run(_demo_command(store, run), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming {run} from step-{steps[0]:08d} (step {steps[0]})" in resumed.stdout
    assert [step for step, _ in list_checkpoints(run)][-1] == 60


def test_ctrl_c_stops_after_the_step_with_a_checkpoint_and_the_same_command_resumes(store, tmp_path):
    _ctrl_c_then_resume(store, tmp_path / "run")


@pytest.mark.slow  # a third run
def test_a_run_stopped_by_ctrl_c_ends_with_the_weights_of_a_run_never_stopped(store, tmp_path):
    run = tmp_path / "run"
    _ctrl_c_then_resume(store, run)
    subprocess.run(_demo_command(store, tmp_path / "straight"), check=True, capture_output=True, timeout=300)
    a = load_file(export(tmp_path / "straight", tmp_path / "a") / "model.safetensors")
    b = load_file(export(run, tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_second_ctrl_c_aborts_at_once_keeping_the_last_checkpoint(store, tmp_path):
    run = tmp_path / "run"
    aborted = _interrupt_at(_demo_command(store, run, "--save-every", "2"), run, step=5, presses=2)
    assert aborted.returncode == 130, aborted.stderr[-3000:]
    steps = [step for step, _ in list_checkpoints(run)]
    assert steps and steps[-1] % 2 == 0, steps  # only the periodic ones: the stop's save never ran
    assert f"infoxlm: interrupted; {run / 'checkpoints' / f'step-{steps[-1]:08d}'} kept: the same command resumes from it" in aborted.stderr
    assert "Traceback" not in aborted.stderr


def test_an_ignored_sigint_stays_ignored_and_a_stop_request_restores_the_handler():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with StopRequest().ctrl_c():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stop = StopRequest()
        with stop.ctrl_c():
            os.kill(os.getpid(), signal.SIGINT)  # the first: a stop request, no KeyboardInterrupt
            assert stop.reached(3, World()) == "Ctrl-C received"
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)  # the second: Python's own handler, at once
                time.sleep(1)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_stop_line_is_never_spliced_into_the_progress_bar(store, tmp_path, capsys):
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(RunStopped):
        pretrain(apply_overrides(preset("test"), OVERRIDES), store, tmp_path / "run", progress=True, stop_at=2)
    err = capsys.readouterr().err
    assert "pretrain:" in err  # the bar was drawn
    pieces = re.split(r"[\r\n]", err)  # what a terminal shows on each line, each redraw
    assert any(piece.startswith("stopped after step 2 of 8") for piece in pieces), err[-600:]


def test_a_stop_during_the_queue_pre_fill_ends_the_run_before_its_first_step(store, tmp_path, capsys):
    """A stop signal while XLCO's queue fills (minutes for a large queue on a CPU) ends the run
    there, not after the step: nothing was trained, nothing is saved, and the same call then
    trains the run a stop never touched."""
    from infoxlm.train.loop import _pretrain

    cfg = lambda: apply_overrides(preset("test"), [*OVERRIDES, "contrast.queue_size=64"])  # 16 batches of 4 keys  # noqa: E731
    stop = StopRequest()
    stop.signal_name = "SIGTERM"  # as if it arrived before the first key batch
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(RunStopped) as stopped:
        _pretrain(cfg(), store, tmp_path / "stopped", stop, progress=False)
    assert stopped.value.step == 0 and "XLCO queue's pre-fill" in stopped.value.reason
    err = capsys.readouterr().err
    assert "stopped before step 1 of 8 (SIGTERM received, during the XLCO queue's pre-fill (0 key batches encoded)); " \
           "no step had run, so nothing was saved; the same command continues the run" in err
    assert list_checkpoints(tmp_path / "stopped") == []
    with contextlib.redirect_stdout(io.StringIO()):
        pretrain(cfg(), store, tmp_path / "stopped", progress=False)
        pretrain(cfg(), store, tmp_path / "straight", progress=False)
    a = load_file(export(tmp_path / "straight", tmp_path / "a") / "model.safetensors")
    b = load_file(export(tmp_path / "stopped", tmp_path / "b") / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
