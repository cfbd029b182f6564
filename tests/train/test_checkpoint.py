"""Checkpoints: sharded (DCP), atomic, complete or absent, the newest k kept, read without
running pickled code; single-file checkpoints of earlier releases still read."""

from __future__ import annotations

import os
import pickle
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from local_ports import free_port

from infoxlm.train.checkpoint import (
    CHECKPOINT_DIR,
    CheckpointCorrupt,
    CheckpointWriter,
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    refuse_non_finite,
    save_checkpoint,
)
from infoxlm.train.distributed import World
from infoxlm.train.errors import TrainingError

def test_save_load_and_keep_last_k(tmp_path):
    for step in (10, 20, 30, 40):
        save_checkpoint(tmp_path, step, {"step": step, "w": torch.full((3,), float(step))}, keep=2)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [30, 40]
    assert (latest_checkpoint(tmp_path) / ".metadata").is_file()
    state = load_checkpoint(latest_checkpoint(tmp_path))
    assert state["step"] == 40 and torch.equal(state["w"], torch.full((3,), 40.0))


def test_nested_state_and_chosen_keys_come_back(tmp_path):
    state = {"step": 3, "config": '{"a": 1}', "model": {"w": torch.arange(6.0).view(2, 3)}, "lrs": [0.1, 0.2]}
    path = save_checkpoint(tmp_path, 3, state)
    back = load_checkpoint(path)
    assert back["config"] == '{"a": 1}' and back["lrs"] == [0.1, 0.2] and torch.equal(back["model"]["w"], state["model"]["w"])
    assert set(load_checkpoint(path, keys=["step", "config"])) == {"step", "config"}


def test_a_killed_save_leaves_the_last_good_checkpoint(tmp_path):
    save_checkpoint(tmp_path, 10, {"step": 10})
    # What a kill in the middle of writing step 20 leaves behind: a temporary directory without its index.
    partial = tmp_path / CHECKPOINT_DIR / ".tmp-step-00000020"
    partial.mkdir()
    (partial / "__0_0.distcp").write_bytes(b"\x80\x02truncated")
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 10
    save_checkpoint(tmp_path, 20, {"step": 20})
    assert not partial.exists()
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 20


def test_a_step_directory_without_its_index_is_not_a_checkpoint(tmp_path):
    path = save_checkpoint(tmp_path, 5, {"step": 5})
    (path / ".metadata").unlink()
    assert latest_checkpoint(tmp_path) is None


def test_an_asynchronous_save_is_in_place_once_waited_for(tmp_path):
    writer = CheckpointWriter(tmp_path, keep=1, asynchronous=True)
    weights = torch.full((4,), 1.0)
    writer.save(1, {"step": 1, "w": weights})
    weights.fill_(2.0)  # training goes on: the save holds the values of its step
    writer.wait()
    assert torch.equal(load_checkpoint(checkpoint_path(tmp_path, 1))["w"], torch.full((4,), 1.0))
    writer.save(2, {"step": 2, "w": weights})
    writer.wait()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2]


@pytest.mark.parametrize("damaged", [".metadata", "__0_0.distcp"])
def test_a_damaged_checkpoint_is_one_line_naming_it(tmp_path, damaged):
    path = save_checkpoint(tmp_path, 5, {"step": 5, "w": torch.ones(8)})
    (path / damaged).write_bytes(b"garbage")
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    message = str(caught.value)
    assert str(path) in message and "cannot read checkpoint" in message
    assert "weights_only" not in message and len(message.splitlines()) == 1


class _RunsCode:
    """Unpickling this runs a command: what a hostile checkpoint would hold."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_an_index_that_would_run_code_is_refused_without_running_it(tmp_path):
    path = save_checkpoint(tmp_path, 5, {"step": 5})
    marker = tmp_path / "ran"
    (path / ".metadata").write_bytes(pickle.dumps(_RunsCode(marker)))
    with pytest.raises(CheckpointCorrupt, match="could run code from the file"):
        load_checkpoint(path)
    assert not marker.exists()


def test_an_item_that_would_run_code_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    path = save_checkpoint(tmp_path, 5, {"step": 5, "thing": _RunsCode(marker)})
    with pytest.raises(CheckpointCorrupt, match="could run code from the file"):
        load_checkpoint(path)
    assert not marker.exists()


# --- single-file checkpoints of earlier releases ---------------------------------------------


def _single_file(tmp_path, state) -> os.PathLike:
    path = checkpoint_path(tmp_path, 5)
    path.mkdir(parents=True)
    torch.save(state, path / "state.pt")
    return path


def test_a_single_file_checkpoint_is_listed_and_read(tmp_path):
    path = _single_file(tmp_path, {"step": 5, "w": torch.ones(2)})
    assert latest_checkpoint(tmp_path) == path
    assert load_checkpoint(path)["step"] == 5


class _Arbitrary:
    """A picklable object that is not a tensor: what weights_only=True refuses."""


def test_a_single_file_checkpoint_holding_an_object_is_refused_with_the_reason(tmp_path):
    path = _single_file(tmp_path, {"step": 5, "thing": _Arbitrary()})
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    message = str(caught.value)
    assert "could run code from the file" in message and "weights_only=False" not in message
    assert len(message.splitlines()) == 1


def test_a_damaged_single_file_checkpoint_is_one_line_without_torchs_advice(tmp_path):
    path = _single_file(tmp_path, {"step": 5})
    (path / "state.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    assert "state.pt: cannot read checkpoint" in str(caught.value)
    assert "weights_only" not in str(caught.value) and len(str(caught.value).splitlines()) == 1


def _check_a_part(rank: int, port: int, out: Path) -> None:
    """One of two gloo processes: rank 1's part of the state holds a NaN, rank 0's does not."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=60))  # fmt: skip
    try:
        part = {"layer": {"weight": torch.tensor([1.0, float("nan") if rank == 1 else 2.0])}}
        refuse_non_finite(part, "step 3", "not saved", World(rank=rank, size=2))
        (out / f"rank{rank}").write_text("went on")
    except TrainingError as err:
        (out / f"rank{rank}").write_text(str(err))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_every_rank_stops_when_one_holds_a_non_finite_shard(tmp_path):
    port = free_port()
    mp.spawn(_check_a_part, args=(port, tmp_path), nprocs=2)
    assert (tmp_path / "rank1").read_text() == "step 3: layer.weight holds non-finite values (and 0 more tensors); not saved"
    assert (tmp_path / "rank0").read_text() == "step 3: another rank's part of the state holds non-finite values; not saved"
