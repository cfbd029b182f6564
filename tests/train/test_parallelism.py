"""Past one process: FSDP2 equals one process, a checkpoint written by N processes continues
on M, background saves, single-file checkpoints of earlier releases still continue."""

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
import torch
from safetensors.torch import load_file

from infoxlm.data.pipeline import DataPipeline
from infoxlm.data.store import TokenStore
from infoxlm.train.checkpoint import checkpoint_path, list_checkpoints
from infoxlm.train.config import apply_overrides
from infoxlm.train.export import export
from infoxlm.train.loop import Trainer, pretrain
from infoxlm.train.parallelism import clip_gradients_with_norm, fill_missing_gradients
from infoxlm.train.presets import preset
from infoxlm.train.stopping import RunStopped

from test_loop import losses, structured_store

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "infoxlm"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return structured_store(tmp_path_factory.mktemp("parallel") / "store")


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, timeout=300)
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr[:3000] + "\n…\n" + stderr[-1500:]


def _weights(run: Path, tmp_path: Path) -> dict[str, torch.Tensor]:
    return load_file(export(run, tmp_path / f"export-{run.name}") / "model.safetensors")


def _largest_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def _sets(overrides: list[str]) -> list[str]:
    """``--set O`` for each override."""
    return [arg for o in overrides for arg in ("--set", o)]


def _quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "activation-checkpointing"])
def test_fsdp_on_two_processes_matches_one(store, tmp_path, checkpointing):
    common = ["pretrain", "--preset", "test", "--data", str(store), "--max-steps", "10", "--no-progress"]
    _run([sys.executable, "-m", "infoxlm", *common, "--output", str(tmp_path / "one")])
    sharded = ["--set", "run.parallelism=fsdp", "--set", f"run.activation_checkpointing={str(checkpointing).lower()}"]
    _run([*TORCHRUN, *common, "--output", str(tmp_path / "fsdp"), *sharded])
    # Each rank wrote its shard of the last checkpoint.
    assert {p.name for p in checkpoint_path(tmp_path / "fsdp", 10).iterdir()} == {".metadata", "__0_0.distcp", "__1_0.distcp", "digests.json"}
    assert _largest_difference(_weights(tmp_path / "one", tmp_path), _weights(tmp_path / "fsdp", tmp_path)) < 1e-4


@pytest.mark.slow
def test_fsdp_with_bf16_compute_and_compiled_layers_trains_as_fp32_does(store, tmp_path):
    """What a GPU run with run.parallelism=fsdp does by default (bf16 compute through FSDP's
    mixed precision with fp32 master weights, compiled layers), here on two CPU processes."""
    common = ["pretrain", "--preset", "test", "--data", str(store), "--max-steps", "10", "--no-progress"]
    _run([sys.executable, "-m", "infoxlm", *common, "--output", str(tmp_path / "fp32")])
    gpu_like = ["run.parallelism=fsdp", "run.cpu_bf16=true", "run.compile=true"]
    _run([*TORCHRUN, *common, "--output", str(tmp_path / "fsdp"), *_sets(gpu_like)])
    reference, sharded = losses(tmp_path / "fp32"), losses(tmp_path / "fsdp")
    assert len(sharded) == 10
    for a, b in zip(reference, sharded):  # bf16 rounding, not another computation
        assert abs(a["loss/mmlm"] - b["loss/mmlm"]) < 0.02 and abs(a["loss/tlm"] - b["loss/tlm"]) < 0.02, (a, b)
    assert sharded[-1]["loss/xlco"] < 0.2 * sharded[0]["loss/xlco"]  # the contrast learns (fp32: 2.83 -> 0.39)
    weights = _weights(tmp_path / "fsdp", tmp_path)  # the fp32 master weights
    assert all(w.dtype == torch.float32 and torch.isfinite(w).all() for w in weights.values())


# Shares of a step that cut into different numbers of MMLM and TLM micro-batches on the two
# ranks, and one XLCO pair a step: the rank without it still runs the key encoder and the
# queue's all-gather.
UNEVEN = ["data.mmlm_batch_size=33", "data.tlm_batch_size=33", "data.xlco_batch_size=1", "data.max_tokens=128"]


@pytest.mark.slow
@pytest.mark.parametrize("parallelism", ["ddp", "fsdp"])
def test_ranks_with_different_micro_batch_counts_match_one_process(store, tmp_path, parallelism):
    # A rank runs fillers where the other has more micro-batches of an objective.
    pipeline = DataPipeline(TokenStore.open(store), apply_overrides(preset("test"), UNEVEN).data)
    counts = [[tuple(map(len, (d.mmlm, d.tlm, d.xlco))) for d in (pipeline.step(s, r, 2) for r in range(2))]
              for s in range(6)]  # fmt: skip
    assert all(any(rank0[j] != rank1[j] for rank0, rank1 in counts) for j in range(3))  # MMLM, TLM, XLCO
    common = ["pretrain", "--preset", "test", "--data", str(store), "--max-steps", "6", "--no-progress", *_sets(UNEVEN)]
    _run([sys.executable, "-m", "infoxlm", *common, "--output", str(tmp_path / "one")])
    _run([*TORCHRUN, *common, "--output", str(tmp_path / "two"), "--set", f"run.parallelism={parallelism}"])
    assert _largest_difference(_weights(tmp_path / "one", tmp_path), _weights(tmp_path / "two", tmp_path)) < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("first", ["ddp", "fsdp"])
def test_a_run_stopped_on_two_processes_continues_on_one(store, tmp_path, first):
    common = ["pretrain", "--preset", "test", "--data", str(store), "--save-every", "5", "--max-steps", "20", "--no-progress"]
    _run([sys.executable, "-m", "infoxlm", *common, "--output", str(tmp_path / "straight")])
    moved = str(tmp_path / "moved")
    _run([*TORCHRUN, *common, "--output", moved, "--stop-at", "10", "--set", f"run.parallelism={first}"])
    assert [step for step, _ in list_checkpoints(tmp_path / "moved")] == [5, 10]
    _run([sys.executable, "-m", "infoxlm", *common, "--output", moved])
    assert _largest_difference(_weights(tmp_path / "straight", tmp_path), _weights(tmp_path / "moved", tmp_path)) < 1e-4


@pytest.mark.slow
def test_a_one_process_run_continues_sharded_on_two(store, tmp_path):
    common = ["pretrain", "--preset", "test", "--data", str(store), "--save-every", "5", "--max-steps", "20", "--no-progress"]
    _run([sys.executable, "-m", "infoxlm", *common, "--output", str(tmp_path / "straight")])
    grown = str(tmp_path / "grown")
    _run([sys.executable, "-m", "infoxlm", *common, "--output", grown, "--stop-at", "10"])
    _run([*TORCHRUN, *common, "--output", grown, "--set", "run.parallelism=fsdp"])
    assert _largest_difference(_weights(tmp_path / "straight", tmp_path), _weights(tmp_path / "grown", tmp_path)) < 1e-4


def _worker_pids(agent: int) -> dict[int, int]:
    """torchrun's workers, the children of its agent process ``agent``: local rank → pid."""
    workers = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            pid, parent = int(stat.parent.name), int(stat.read_text().rsplit(")", 1)[1].split()[1])
            environ = (stat.parent / "environ").read_bytes().split(b"\0")
            rank = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"LOCAL_RANK=")]
            if parent == agent and rank:
                workers[int(rank[0])] = pid
    return workers


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds torchrun's workers through /proc")
def test_torchrun_restarts_a_dead_worker_from_the_last_checkpoint(store, tmp_path):
    common = ["pretrain", "--preset", "test", "--data", str(store), "--save-every", "2", "--max-steps", "24", "--no-progress",
              "--set", "model.dropout=0.1"]  # fmt: skip
    _run([*TORCHRUN, *common, "--output", str(tmp_path / "straight")])
    killed = tmp_path / "killed"
    restarting = [*TORCHRUN[:3], "--max-restarts", "1", *TORCHRUN[3:]]
    # As scripts/slurm/pretrain.sbatch launches it: a fresh rendezvous store for the restart.
    env = {**os.environ, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    agent = subprocess.Popen([*restarting, *common, "--output", str(killed)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env)  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline and not any(step >= 8 for step, _ in list_checkpoints(killed)):
        time.sleep(0.05)
    workers = _worker_pids(agent.pid)
    assert set(workers) == {0, 1}, workers
    os.kill(workers[1], signal.SIGKILL)
    output, _ = agent.communicate(timeout=300)
    assert agent.returncode == 0, output[-3000:]
    # The second attempt started from a checkpoint the first wrote, then ran to the end.
    resumed = [int(line.rsplit("(step ", 1)[1].rstrip(")")) for line in output.splitlines()
               if line.startswith(f"resuming {killed} from ")]  # fmt: skip
    assert len(resumed) == 1 and 8 <= resumed[0] < 24, output[-3000:]
    assert list_checkpoints(killed)[-1][0] == 24
    a, b = _weights(tmp_path / "straight", tmp_path), _weights(killed, tmp_path)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_background_checkpoints_hold_what_blocking_ones_hold(store, tmp_path):
    cfg = lambda extra: apply_overrides(preset("test"), ["optim.max_steps=6", "run.save_every=2", *extra])  # noqa: E731
    _quiet(pretrain, cfg([]), store, tmp_path / "blocking", progress=False)
    _quiet(pretrain, cfg(["run.async_checkpoint=true"]), store, tmp_path / "background", progress=False)
    assert [s for s, _ in list_checkpoints(tmp_path / "background")] == [2, 4, 6]
    a, b = _weights(tmp_path / "blocking", tmp_path), _weights(tmp_path / "background", tmp_path)
    assert all(torch.equal(a[k], b[k]) for k in a)


def _rewrite_as_single_file(run: Path, store: Path, cfg) -> None:
    """The latest checkpoint of ``run`` in the single-file layout of earlier releases."""
    trainer = _quiet(Trainer, cfg, store, run, progress=False)  # resumes from it
    state = {
        "step": trainer.step,
        "model": trainer.encoder.state_dict(),
        "contrast": trainer.model.contrast.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": trainer.scheduler.state_dict(),
        "encoder_config": trainer.checkpoint_state()["encoder_config"],
        "config": trainer.config.to_json(),
        "store_identity": trainer.checkpoint_state()["store_identity"],
    }
    folder = checkpoint_path(run, trainer.step)
    for part in folder.iterdir():
        part.unlink()
    torch.save(state, folder / "state.pt")


def test_a_single_file_checkpoint_of_an_earlier_release_continues(store, tmp_path):
    cfg = lambda steps: apply_overrides(preset("test"), [f"optim.max_steps={steps}", "run.save_every=4"])  # noqa: E731
    _quiet(pretrain, cfg(8), store, tmp_path / "straight", progress=False)
    with pytest.raises(RunStopped):
        _quiet(pretrain, cfg(8), store, tmp_path / "old", progress=False, stop_at=4)
    _rewrite_as_single_file(tmp_path / "old", store, cfg(8))
    _quiet(pretrain, cfg(8), store, tmp_path / "old", progress=False)
    assert (checkpoint_path(tmp_path / "old", 8) / ".metadata").is_file()  # its next one is sharded
    assert _largest_difference(_weights(tmp_path / "straight", tmp_path), _weights(tmp_path / "old", tmp_path)) < 1e-6


def test_clipping_matches_torchs_and_returns_the_norm_before():
    torch.manual_seed(0)
    ours, theirs = [torch.nn.Parameter(torch.randn(5, 3)) for _ in range(2)], None
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    for group in (ours, theirs):
        for p in group:
            p.grad = torch.full_like(p, 2.0)
    norm = float(clip_gradients_with_norm(ours, 1.0))
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert norm == pytest.approx(float(expected)) and all(torch.equal(a.grad, b.grad) for a, b in zip(ours, theirs))


def test_a_parameter_no_objective_reached_gets_a_zero_gradient():
    reached, missed = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))
    reached.grad = torch.ones(2)
    fill_missing_gradients([reached, missed])
    assert torch.equal(reached.grad, torch.ones(2)) and torch.equal(missed.grad, torch.zeros(3))


def test_an_unknown_parallelism_is_named():
    from infoxlm.train.config import ConfigError

    with pytest.raises(ConfigError, match=r"run.parallelism='zero3': expected one of ddp, fsdp"):
        apply_overrides(preset("test"), ["run.parallelism=zero3"])
