"""Checkpoints: sharded (DCP), atomic, complete or absent, the newest k kept, read without
running pickled code, checked against their digests before use; single-file checkpoints of
earlier releases still read."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from damaged_checkpoints import MALFORMED_INDEX, flip_tensor_bytes, malform_index, payloads, runs_under_plain_pickle
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
    resume_checkpoint,
    save_checkpoint,
    verified_checkpoint,
    verify_checkpoint,
)
from infoxlm.train.checkpoint_integrity import read_index
from infoxlm.train.distributed import World
from infoxlm.train.errors import TrainingError, UnsafeCheckpoint


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


# --- digests: what was written is what is read ------------------------------------------------


def _digests(path: Path) -> dict:
    return json.loads((path / "digests.json").read_text())


@pytest.mark.parametrize("asynchronous", [False, True])
def test_every_file_of_a_checkpoint_has_its_digest(tmp_path, asynchronous):
    writer = CheckpointWriter(tmp_path, asynchronous=asynchronous)
    writer.save(3, {"step": 3, "w": torch.arange(1000.0)})
    writer.wait()
    path = checkpoint_path(tmp_path, 3)
    digests = _digests(path)
    assert digests["algorithm"] == "sha256"
    assert set(digests["files"]) == {p.name for p in path.iterdir()} - {"digests.json"} == {".metadata", "__0_0.distcp"}
    for name, record in digests["files"].items():
        data = (path / name).read_bytes()
        assert record == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert verify_checkpoint(path) is None


def test_flipped_bytes_in_a_shard_are_refused_naming_the_file(tmp_path):
    path = save_checkpoint(tmp_path, 3, {"step": 3, "w": torch.arange(100_000.0)})
    shard = flip_tensor_bytes(path)
    # What the check stands between: DCP reads the flipped bytes without a word.
    assert not torch.equal(load_checkpoint(path)["w"], torch.arange(100_000.0))
    with pytest.raises(CheckpointCorrupt) as caught:
        verify_checkpoint(path)
    message = str(caught.value)
    assert message.startswith(f"{shard}: damaged: its SHA-256 is not the one digests.json recorded") and "\n" not in message


@pytest.mark.parametrize("with_digests", [True, False])
def test_a_truncated_shard_says_truncated_naming_it(tmp_path, with_digests):
    path = save_checkpoint(tmp_path, 3, {"step": 3, "w": torch.arange(1000.0)})
    if not with_digests:
        (path / "digests.json").unlink()
    shard = path / "__0_0.distcp"
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: size // 2])
    expected = f"digests.json recorded {size:,}" if with_digests else "the index .metadata places data up to byte"
    with pytest.raises(CheckpointCorrupt) as caught:
        verify_checkpoint(path)
    assert str(caught.value).startswith(f"{shard}: truncated: {size // 2:,} bytes where {expected}")


def test_a_checkpoint_written_without_digests_is_read_with_a_note(tmp_path):
    path = save_checkpoint(tmp_path, 3, {"step": 3, "w": torch.ones(4)})
    (path / "digests.json").unlink()
    assert verify_checkpoint(path) == f"note: {path} has no digests.json (an earlier infoxlm wrote it): its files cannot be verified"


def test_a_digest_list_that_leaves_the_directory_is_refused(tmp_path):
    path = save_checkpoint(tmp_path, 3, {"step": 3})
    digests = _digests(path)
    digests["files"]["../../elsewhere"] = {"size": 1, "sha256": "0" * 64}
    (path / "digests.json").write_text(json.dumps(digests))
    with pytest.raises(CheckpointCorrupt, match=r"digests\.json: not a checkpoint's digest list"):
        verify_checkpoint(path)


def test_a_shard_the_digest_list_does_not_name_is_refused(tmp_path):
    path = save_checkpoint(tmp_path, 3, {"step": 3})
    digests = _digests(path)
    del digests["files"]["__0_0.distcp"]
    (path / "digests.json").write_text(json.dumps(digests))
    with pytest.raises(CheckpointCorrupt, match=r"__0_0\.distcp: not listed in digests\.json"):
        verify_checkpoint(path)


# --- which checkpoint a run resumes from, which one an export reads ---------------------------


def _three_checkpoints(tmp_path) -> list[Path]:
    return [save_checkpoint(tmp_path, step, {"step": step, "w": torch.arange(50_000.0)}) for step in (2, 4, 6)]


def test_a_resume_passes_over_damaged_checkpoints_saying_so(tmp_path, capsys):
    old, middle, newest = _three_checkpoints(tmp_path)
    flipped = flip_tensor_bytes(newest)
    truncated = middle / "__0_0.distcp"
    truncated.write_bytes(truncated.read_bytes()[:100])
    assert resume_checkpoint(tmp_path) == old
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"warning: {flipped}: damaged: ") and lines[0].endswith("; ignoring step-00000006, resuming from step-00000002")
    assert lines[1].startswith(f"warning: {truncated}: truncated: ") and lines[1].endswith("; ignoring step-00000004, resuming from step-00000002")


def test_a_resume_refuses_when_every_checkpoint_is_damaged(tmp_path, capsys):
    path = save_checkpoint(tmp_path, 2, {"step": 2, "w": torch.arange(50_000.0)})
    shard = flip_tensor_bytes(path)
    with pytest.raises(CheckpointCorrupt, match=rf"^{shard}: damaged: .*; no older checkpoint is intact \(move the damaged"):
        resume_checkpoint(tmp_path)


def test_a_resume_says_an_incomplete_checkpoint_is_ignored(tmp_path, capsys):
    path = save_checkpoint(tmp_path, 2, {"step": 2})
    (path / ".metadata").unlink()
    assert resume_checkpoint(tmp_path) is None
    assert capsys.readouterr().err == (
        f"warning: {path}: incomplete (no .metadata index); ignoring step-00000002, starting from step 0\n"
    )
    newer = save_checkpoint(tmp_path, 4, {"step": 4})
    (newer / ".metadata").unlink()
    save_checkpoint(tmp_path, 3, {"step": 3})
    assert resume_checkpoint(tmp_path) == checkpoint_path(tmp_path, 3)
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {newer}: incomplete (no .metadata index); ignoring step-00000004, resuming from step-00000003",
        f"warning: {path}: incomplete (no .metadata index); ignoring step-00000002, resuming from step-00000003",
    ]


def test_an_export_refuses_a_damaged_checkpoint_naming_the_newest_intact_one(tmp_path):
    old, middle, newest = _three_checkpoints(tmp_path)
    flip_tensor_bytes(middle)
    shard = flip_tensor_bytes(newest)
    with pytest.raises(CheckpointCorrupt) as caught:
        verified_checkpoint(newest)
    assert str(caught.value).startswith(f"{shard}: damaged: ")
    assert str(caught.value).endswith("; the newest intact checkpoint is step-00000002 (--step 2)")
    assert verified_checkpoint(old) == old


# --- an index that would run code -------------------------------------------------------------


@pytest.mark.parametrize("gadget", sorted(payloads(Path("marker"))))
def test_an_index_naming_code_is_refused_without_running_it(tmp_path, gadget):
    marker = tmp_path / "ran"
    payload = payloads(marker)[gadget]
    assert runs_under_plain_pickle(payload, marker)  # the payload is live
    old = save_checkpoint(tmp_path, 2, {"step": 2})
    path = save_checkpoint(tmp_path, 5, {"step": 5})
    (path / ".metadata").write_bytes(payload)
    (path / "digests.json").unlink()  # what whoever made it would do; with it, the index's digest differs
    for read in (load_checkpoint, read_index, verify_checkpoint, verified_checkpoint):
        with pytest.raises(UnsafeCheckpoint, match=r"\.metadata: names .*; infoxlm refuses to load it, since unpickling it could run code"):
            read(path)
    # Never passed over for an older checkpoint: it was made, not damaged.
    with pytest.raises(UnsafeCheckpoint):
        resume_checkpoint(tmp_path)
    assert not marker.exists() and old.is_dir()


def test_the_index_of_a_changed_checkpoint_is_not_unpickled(tmp_path):
    marker = tmp_path / "ran"
    path = save_checkpoint(tmp_path, 5, {"step": 5})
    (path / ".metadata").write_bytes(payloads(marker)["dotted name"])
    with pytest.raises(CheckpointCorrupt, match=r"\.metadata: (damaged|truncated)"):
        verify_checkpoint(path)
    assert not marker.exists()


# --- an index whose fields have the wrong types ------------------------------------------------

_FIELD_NAMED = {
    "storage_meta a string": "field storage_meta is 'abc'; expected a StorageMeta or None",
    "storage_meta a list 200 deep": "field storage_meta is [[[[[[[...]]]]]]]; expected a StorageMeta or None",
    "offset None": "field storage_data['step'].offset is missing; expected a non-negative integer",
    "offset 'abc'": "field storage_data['step'].offset is 'abc'; expected a non-negative integer",
    "length -5": "field storage_data['step'].length is -5; expected a non-negative integer",
    "storage_data a list": "field storage_data is [1]; expected a dict of where each entry is stored",
    "an entry a string": "field state_dict_metadata['step'] is 'bytes'; expected a TensorStorageMetadata or BytesStorageMetadata",
    "size a string": "field state_dict_metadata['w'].size is 'abc'; expected a tuple of sizes (non-negative integers)",
    "chunks None": "field state_dict_metadata['w'].chunks is None; expected a list of chunks",
    "a compressed item": "field storage_data['step'].transform_descriptors is ['zstd']; "
                         "expected none (infoxlm writes no compressed or transformed items)",
    "a tensor larger than its data": re.compile(r"field state_dict_metadata\['w'\]\.chunks\[0\]'s bytes \(1,024,000,000 of "
                                                r"torch\.float32\) is 4096000000; expected at most the [\d,]+ stored for it"),
}


@pytest.mark.parametrize("field", sorted(MALFORMED_INDEX))
def test_an_index_field_of_the_wrong_type_is_named_before_it_is_used(tmp_path, field):
    old = save_checkpoint(tmp_path, 2, {"step": 2, "w": torch.ones(3)})
    path = save_checkpoint(tmp_path, 5, {"step": 5, "w": torch.ones(3)})
    malform_index(path, MALFORMED_INDEX[field])
    named = _FIELD_NAMED[field]
    expected = re.escape(f"{path / '.metadata'}: ") + (named.pattern if isinstance(named, re.Pattern) else re.escape(named))
    for read in (read_index, verify_checkpoint, load_checkpoint):
        with pytest.raises(CheckpointCorrupt) as caught:
            read(path)
        assert re.fullmatch(expected, str(caught.value)), str(caught.value)
    with pytest.raises(CheckpointCorrupt) as caught:
        verified_checkpoint(path)  # an export
    assert re.fullmatch(expected + re.escape("; the newest intact checkpoint is step-00000002 (--step 2)"), str(caught.value))
    assert resume_checkpoint(tmp_path) == old  # passed over as damaged, saying so


# --- several processes ------------------------------------------------------------------------


def _save_parts(rank: int, port: int, out: Path, asynchronous: bool) -> None:
    """One of two gloo processes: each saves a part only it holds, then checks the checkpoint
    (hashing its share of the files) after rank 1's part was damaged."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=60))  # fmt: skip
    try:
        writer = CheckpointWriter(out, rank, distributed=True, asynchronous=asynchronous)
        writer.save(3, {"step": 3, f"part{rank}": torch.full((50_000,), float(rank))})
        writer.wait()
        dist.barrier()
        path = checkpoint_path(out, 3)
        assert verify_checkpoint(path, World(rank=rank, size=2)) is None
        if rank == 0:
            flip_tensor_bytes_of(path, "__1_0.distcp")
        dist.barrier()
        try:
            verify_checkpoint(path, World(rank=rank, size=2))
            (out / f"rank{rank}").write_text("went on")
        except CheckpointCorrupt as err:
            (out / f"rank{rank}").write_text(str(err))
    finally:
        dist.destroy_process_group()


def flip_tensor_bytes_of(path: Path, name: str) -> None:
    shard = path / name
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(data)


@pytest.mark.slow
@pytest.mark.parametrize("asynchronous", [False, True])
def test_every_rank_records_its_files_and_both_find_a_damaged_one(tmp_path, asynchronous):
    mp.spawn(_save_parts, args=(free_port(), tmp_path, asynchronous), nprocs=2)
    path = checkpoint_path(tmp_path, 3)
    assert set(_digests(path)["files"]) == {".metadata", "__0_0.distcp", "__1_0.distcp"}
    assert {p.name for p in path.iterdir()} == {".metadata", "__0_0.distcp", "__1_0.distcp", "digests.json"}
    expected = f"{path / '__1_0.distcp'}: damaged: its SHA-256 is not the one digests.json recorded when the checkpoint was written"
    assert (tmp_path / "rank0").read_text() == (tmp_path / "rank1").read_text() == expected
