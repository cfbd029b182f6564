"""A disk that fills while a command writes: every command ends with one line on stderr naming
the output and "no space left on device", a non-zero exit, no temporary or partial output left,
and what was there before (earlier checkpoints, complete lines of metrics.jsonl) untouched.

The full disk is simulated (tests/full_disk.py): each writer fails as its library does on a
real one (torch's zip writer over the OSError, safetensors' and tokenizers' own errors, numpy's
short write), so that no test needs root or a tmpfs."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from full_disk import Disk, enospc, partial_then
from local_ports import free_port

from infoxlm.cli import main
from infoxlm.outputs import NoSpaceLeft
from infoxlm.train.checkpoint import CheckpointWriter, checkpoint_path, list_checkpoints, verify_checkpoint
from infoxlm.train.metrics import MetricsLog


def fails(capsys, *argv: str) -> str:
    """Run the command in this process: it must exit 1 with one line on stderr; that line."""
    code = main([str(a) for a in argv])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "%|" not in line]
    assert code == 1 and len(err) == 1, err
    return err[0]


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _pretrain(capsys, tiny_run, run: Path, *extra: str) -> str:
    """`pretrain --preset test` into ``run``, 3 steps with a checkpoint after each, on the store
    of ``tiny_run``: it must fail; its line."""
    return fails(capsys, "pretrain", "--preset", "test", "--data", tiny_run.parent / "store", "--output", run,
                 "--max-steps", "3", "--save-every", "1", "--set", "contrast.layer=2", "--no-progress", *extra)


# --- checkpoints ---------------------------------------------------------------------------------


def _state(step: int) -> dict:
    return {"step": step, "w": torch.arange(10_000.0) + step, "config": json.dumps({"a": step})}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_checkpoint_that_fills_the_disk_leaves_the_last_good_one_and_no_temporary(tmp_path, monkeypatch, asynchronous):
    writer = CheckpointWriter(tmp_path, asynchronous=asynchronous)
    writer.save(1, _state(1))
    writer.wait()
    first = checkpoint_path(tmp_path, 1)
    before = {p.name: p.read_bytes() for p in first.iterdir()}
    monkeypatch.setattr(torch, "save", Disk(room=20_000).torch_save)  # room for part of the tensor
    with pytest.raises(NoSpaceLeft) as caught:
        writer.save(2, _state(2))
        writer.wait()  # an asynchronous save's failure surfaces here
    assert str(caught.value) == (
        f"no space left on device while writing {checkpoint_path(tmp_path, 2)}; the last good checkpoint is {first}"
    )
    assert listing(tmp_path / "checkpoints") == sorted(["step-00000001", *(f"step-00000001/{n}" for n in before)])
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before and verify_checkpoint(first) is None


def _save_on_a_full_disk(rank: int, port: int, out: Path) -> None:
    """One of two gloo processes saving one checkpoint; rank 1's disk is full."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=60))  # fmt: skip
    try:
        if rank == 1:
            torch.save = Disk(room=200).torch_save  # part of a tensor: torch raises its own error over the OSError
        # Replicated tensors are written once, shared out among the ranks: rank 1 writes some.
        state = {name: torch.arange(1000.0) for name in "abcd"}
        CheckpointWriter(out, rank=rank, distributed=True).save(1, state)
        (out / f"rank{rank}").write_text("saved")
    except NoSpaceLeft as err:
        (out / f"rank{rank}").write_text(str(err))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_every_rank_says_no_space_when_one_ranks_disk_is_full(tmp_path):
    """DCP hands a rank's error to the others pickled, which drops the OSError that torch's zip
    writer raised its own error over: the rank's writer names the full disk itself."""
    mp.spawn(_save_on_a_full_disk, args=(free_port(), tmp_path), nprocs=2)
    said = f"no space left on device while writing {checkpoint_path(tmp_path, 1)}; no checkpoint was saved in {tmp_path}"
    assert (tmp_path / "rank0").read_text() == said and (tmp_path / "rank1").read_text() == said
    assert listing(tmp_path / "checkpoints") == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_pretrain_on_a_disk_that_fills_ends_in_one_line_naming_the_checkpoint(tiny_run, tmp_path, capsys, monkeypatch,
                                                                             asynchronous):
    """The disk fills before the second step's checkpoint: the first one stays, nothing else."""
    from infoxlm.train import checkpoint

    disk = Disk(full=False)
    real_save = checkpoint.CheckpointWriter.save

    def save_filling_at_step_2(self, step, state):
        self.wait()  # a background save of step 1 still writing (a busy host) ends on a disk with room
        disk.full = step >= 2
        return real_save(self, step, state)

    monkeypatch.setattr(torch, "save", disk.torch_save)
    monkeypatch.setattr(checkpoint.CheckpointWriter, "save", save_filling_at_step_2)
    run = tmp_path / "run"
    err = _pretrain(capsys, tiny_run, run, "--set", f"run.async_checkpoint={str(asynchronous).lower()}")
    first = checkpoint_path(run, 1)
    assert err == (f"infoxlm: error: no space left on device while writing {checkpoint_path(run, 2)}; "
                   f"the last good checkpoint is {first}")
    assert [step for step, _ in list_checkpoints(run)] == [1] and verify_checkpoint(first) is None
    assert not [p for p in (run / "checkpoints").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("filled_by", [".lock", "store_identity.json"])
def test_pretrain_that_cannot_start_on_a_full_disk_leaves_no_run_directory(tiny_run, tmp_path, capsys, monkeypatch,
                                                                           filled_by):
    """The lock's record, or a file of the run written before the first step, finds the disk full."""
    import os

    real_write_text = Path.write_text

    def pwrite(fd, data, offset):
        raise enospc()

    def write_text(self, *args, **kwargs):
        if self.name.startswith(f".{filled_by}."):  # atomic_file's temporary
            raise enospc()
        return real_write_text(self, *args, **kwargs)

    if filled_by == ".lock":
        monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(Path, "write_text", write_text)
    run = tmp_path / "runs" / "new"
    assert _pretrain(capsys, tiny_run, run) == f"infoxlm: error: no space left on device while writing {run / filled_by}"
    assert listing(tmp_path) == []


# --- metrics.jsonl and TensorBoard -------------------------------------------------------------


def test_a_metrics_line_is_appended_whole_or_not_at_all(tmp_path, monkeypatch):
    import infoxlm.train.metrics as metrics

    disk = Disk(full=False)
    monkeypatch.setattr(metrics, "open", disk.opener(open), raising=False)
    log = MetricsLog(tmp_path)
    log.write(1, {"loss": 1.5})
    before = (tmp_path / "metrics.jsonl").read_bytes()
    disk.full, disk.room = True, 10  # the next line fits in part
    with pytest.raises(NoSpaceLeft, match=f"^no space left on device while writing {tmp_path / 'metrics.jsonl'}$"):
        log.write(2, {"loss": 1.25})
    log.close()
    assert (tmp_path / "metrics.jsonl").read_bytes() == before


def test_tensorboard_finding_the_disk_full_is_one_error_naming_its_directory(tmp_path, capsys, monkeypatch):
    """TensorBoard's writer thread meets the full disk: no traceback from the thread, and the
    next step's write raises it, naming RUN/tensorboard."""
    pytest.importorskip("torch.utils.tensorboard")
    from tensorboard.summary.writer import record_writer

    def no_space(self, data):
        raise enospc()

    log = MetricsLog(tmp_path)
    monkeypatch.setattr(record_writer.RecordWriter, "write", no_space)
    with pytest.raises(NoSpaceLeft, match=f"^no space left on device while writing {tmp_path / 'tensorboard'}$"):
        for step in range(1, 200):
            log.write(step, {"loss": 1.0})
            time.sleep(0.02)  # the thread writes in the background
    log.close()
    assert capsys.readouterr().err == ""


def test_pretrain_whose_metrics_fill_the_disk_keeps_every_line_whole(tiny_run, tmp_path, capsys, monkeypatch):
    import infoxlm.train.metrics as metrics

    disk = Disk(room=20, full=False)
    real_write = metrics.MetricsLog.write

    def write_filling_at_step_2(self, step, values):
        disk.full = step >= 2
        return real_write(self, step, values)

    monkeypatch.setattr(metrics, "open", disk.opener(open), raising=False)
    monkeypatch.setattr(metrics.MetricsLog, "write", write_filling_at_step_2)
    run = tmp_path / "run"
    err = _pretrain(capsys, tiny_run, run)
    assert err == f"infoxlm: error: no space left on device while writing {run / 'metrics.jsonl'}"
    text = (run / "metrics.jsonl").read_text()
    assert [json.loads(line)["step"] for line in text.splitlines()] == [1] and text.endswith("\n")


# --- export, embed, eval ---------------------------------------------------------------------------


def test_export_that_fills_the_disk_leaves_nothing(tiny_run, tmp_path, capsys, monkeypatch):
    from safetensors import SafetensorError

    no_space = SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    monkeypatch.setattr("infoxlm.model.hub.save_file", partial_then(no_space, 1))
    out = tmp_path / "exports" / "hf"
    assert fails(capsys, "export", tiny_run, out) == f"infoxlm: error: no space left on device while writing {out}"
    assert listing(tmp_path) == []


def test_embed_that_fills_the_disk_leaves_nothing(tiny_model_dir, tmp_path, capsys, monkeypatch):
    src = tmp_path / "in.txt"
    src.write_text("hello\nworld\n")
    monkeypatch.setattr(np, "save", partial_then(OSError("192000 requested and 20448 written")))
    out = tmp_path / "vectors" / "v.npy"
    err = fails(capsys, "embed", "--model", tiny_model_dir, "--input", src, "--output", out)
    assert err == f"infoxlm: error: no space left on device while writing {out}"
    assert listing(tmp_path) == ["in.txt"]


@pytest.mark.parametrize("filled_by", ["json", "png"])
def test_eval_that_fills_the_disk_leaves_neither_the_json_nor_the_plot(tiny_model_dir, tatoeba, tmp_path, capsys,
                                                                      monkeypatch, filled_by):
    import infoxlm.eval.plots

    real_write_text, real_plot = Path.write_text, infoxlm.eval.plots.plot_layerwise

    def write_text(self, *args, **kwargs):
        if self.name.startswith(".t.json") and filled_by == "json":
            raise enospc()
        return real_write_text(self, *args, **kwargs)

    def plot(curves, path, title, **drawn):
        if filled_by == "png":
            Path(path).write_bytes(b"\x89PNG half")
            raise enospc()  # matplotlib's savefig passes write(2)'s error on, without a file name
        return real_plot(curves, path, title, **drawn)

    monkeypatch.setattr(Path, "write_text", write_text)
    monkeypatch.setattr(infoxlm.eval.plots, "plot_layerwise", plot)
    out = tmp_path / "res" / "t.json"
    err = fails(capsys, "eval", "tatoeba", "--model", tiny_model_dir, "--data", tatoeba, "--layer", "all",
                "--no-progress", "--output", out)
    assert err == f"infoxlm: error: no space left on device while writing {out.with_suffix('.' + filled_by)}"
    assert not (tmp_path / "res").exists()


# --- tokenizer train -------------------------------------------------------------------------------


class _SavesOnAFullDisk:
    """The trained ``tokenizers`` model, whose save writes part of tokenizer.json and raises
    what tokenizers raises (a plain Exception with Rust's words)."""

    def __init__(self, trained):
        self._trained = trained

    def save(self, path, pretty=True):
        partial_then(Exception("No space left on device (os error 28)"))(path)


@pytest.mark.parametrize("existing", [False, True], ids=["new", "replacing"])
def test_tokenizer_train_that_fills_the_disk_leaves_the_output_as_it_was(tmp_path, capsys, monkeypatch, existing):
    import infoxlm.tokenizer_training as training

    text = tmp_path / "en.txt"
    text.write_text("the cat sat on the mat\nthe dog ate the bone\n" * 50)
    out = tmp_path / "tok"
    if existing:  # a tokenizer trained before, beside a file of the user's
        assert main(["tokenizer", "train", "--input", str(text), "--output", str(out), "--vocab-size", "40",
                     "--no-progress"]) == 0
        (out / "notes.txt").write_text("mine")
        capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir()} if existing else None
    real_train = training.train_unigram  # the name tokenizer_training calls
    monkeypatch.setattr(training, "train_unigram", lambda *a, **k: _SavesOnAFullDisk(real_train(*a, **k)))
    err = fails(capsys, "tokenizer", "train", "--input", text, "--output", out, "--vocab-size", "40", "--no-progress")
    assert err == f"infoxlm: error: no space left on device while writing {out}"
    if existing:
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    else:
        assert listing(tmp_path) == ["en.txt"]
