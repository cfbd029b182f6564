"""Output paths: the checks commands make before working, and writes that leave no half result."""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from infoxlm.outputs import (
    NoSpaceLeft,
    OutputError,
    atomic_dir,
    atomic_file,
    atomic_files,
    check_output_dir,
    check_output_file,
    enclosing_store_or_run,
    full_disk_named,
    is_run_directory,
    no_space_left,
)
from infoxlm.outputs import _HOST

from full_disk import Disk, enospc


def test_check_output_file(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    assert check_output_file(tmp_path / "new" / "deeper.json") == tmp_path / "new" / "deeper.json"
    with pytest.raises(OutputError, match="is a directory"):
        check_output_file(tmp_path / "d")
    with pytest.raises(OutputError, match=r"f is a file, not a directory"):
        check_output_file(tmp_path / "f" / "x" / "y.json")


def test_check_output_dir_protects_sources_even_with_overwrite(tmp_path):
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    for out, message in ((run, "is the run"), (run / "x", "inside the run"), (tmp_path / "runs", "holds the run")):
        with pytest.raises(OutputError, match=message):
            check_output_dir(out, written_by_us=lambda p: True, overwrite=True, sources=[("run", run)])
    assert check_output_dir(tmp_path / "runs" / "b", sources=[("run", run)]) == tmp_path / "runs" / "b"


def test_check_output_dir_refuses_foreign_non_empty_directories(tmp_path):
    (tmp_path / "mine.txt").write_text("x")
    with pytest.raises(OutputError, match="not empty.*--force"):
        check_output_dir(tmp_path, written_by_us=lambda p: False, flag="--force")
    assert check_output_dir(tmp_path, written_by_us=lambda p: False, overwrite=True) == tmp_path
    assert check_output_dir(tmp_path, written_by_us=lambda p: True) == tmp_path
    assert check_output_dir(tmp_path) == tmp_path  # no recogniser: any directory will do
    with pytest.raises(OutputError, match="is a file"):
        check_output_dir(tmp_path / "mine.txt")


def test_atomic_file_renames_on_success_and_removes_on_failure(tmp_path):
    with atomic_file(tmp_path / "sub" / "a.png") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path / "sub"
        tmp.write_text("done")
    assert (tmp_path / "sub" / "a.png").read_text() == "done"
    with pytest.raises(KeyboardInterrupt):
        with atomic_file(tmp_path / "sub" / "b.json") as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["a.png"]


def test_atomic_dir_replaces_whole_or_not_at_all(tmp_path):
    out = tmp_path / "hf"
    with atomic_dir(out) as tmp:
        (tmp / "one").write_text("1")
    with pytest.raises(RuntimeError):
        with atomic_dir(out, replace=True) as tmp:
            (tmp / "two").write_text("2")
            raise RuntimeError("crash")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"] and [p.name for p in out.iterdir()] == ["one"]
    with pytest.raises(OutputError, match="exists"):
        with atomic_dir(out) as tmp:
            pass
    with atomic_dir(out, replace=True) as tmp:
        (tmp / "two").write_text("2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"] and [p.name for p in out.iterdir()] == ["two"]


def killed_writer(target: Path, writes: str) -> None:
    """A process killed (SIGKILL: no cleanup runs) inside ``writes``' context manager on ``target``."""
    code = (
        f"import os, signal; from pathlib import Path; from infoxlm.outputs import {writes}\n"
        f"with {writes}(Path({str(target)!r})) as tmp:\n"
        "    (tmp / 'x').write_text('half') if tmp.is_dir() else tmp.write_text('half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == -signal.SIGKILL


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL, and no safe way to ask whether a process runs")
@pytest.mark.parametrize("writes", ["atomic_dir", "atomic_file"])
def test_the_next_write_removes_what_a_killed_writer_left(tmp_path, writes):
    target = tmp_path / ("hf" if writes == "atomic_dir" else "v.npy")
    killed_writer(target, writes)
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(f".{target.name}."), left  # what a killed writer leaves
    # A live writer's temporary, one of another host and one named before names carried a writer.
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = [f".{target.name}.partial-{_HOST}.{live.pid}.abcd1234", f".{target.name}.partial-00000000.{live.pid + 1}.abcd1234",
                f".{target.name}.partial-abcd1234"]
        for name in kept:
            (tmp_path / name).mkdir()
        with (atomic_dir if writes == "atomic_dir" else atomic_file)(target) as tmp:
            assert tmp.parent == tmp_path
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, *kept])
    finally:
        live.kill()
        live.wait()


def test_a_directory_moved_aside_stays_until_its_target_is_back(tmp_path):
    """A writer killed between atomic_dir's two renames: the earlier result is only in .old-."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    old = tmp_path / f".hf.old-{_HOST}.{dead}.abcd1234"
    (old / "d").mkdir(parents=True)
    with atomic_dir(tmp_path / "other"):
        pass
    assert old.is_dir()
    with atomic_dir(tmp_path / "hf"):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "other"]


def test_an_export_directory_holding_a_users_file_is_not_ours(tmp_path):
    """An earlier export may be replaced without --overwrite; one the user added files to may not."""
    from infoxlm.model.config import EncoderConfig
    from infoxlm.model.hub import written_by_infoxlm

    EncoderConfig.of_size("tiny").save(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert written_by_infoxlm(tmp_path)
    (tmp_path / "tatoeba.json").write_text("{}")  # e.g. `infoxlm eval tatoeba --output OUT/tatoeba.json`
    assert not written_by_infoxlm(tmp_path)
    with pytest.raises(OutputError, match="not empty.*--overwrite"):
        check_output_dir(tmp_path, written_by_us=written_by_infoxlm)


def test_check_output_dir_refuses_any_place_inside_a_token_store_or_a_run(tmp_path):
    """Written inside a store, a directory is read as one of its corpora (STORE/mono/hf) and the
    store breaks; a run likewise. Found by the marker files, at any depth, whatever --overwrite says."""
    store, run = tmp_path / "store", tmp_path / "runs" / "r1"
    (store / "mono").mkdir(parents=True)
    (store / "store.json").write_text('{"format": "infoxlm-token-store", "version": 2}')
    run.mkdir(parents=True)
    (run / "config.json").write_text('{"optim": {}, "run": {}, "model": {}}')
    for out, what, where in [
        (store / "mono" / "hf", "token store", store),
        (store / "a" / "b", "token store", store),
        (run / "exports" / "hf", "run directory", run),
    ]:
        with pytest.raises(OutputError, match=f"{out}: is inside the {what} {where}; write outside it"):
            check_output_dir(out, written_by_us=lambda p: True, overwrite=True)
        assert not out.exists()
    # Beside them, or a look-alike's children (another tool's store.json or config.json), is fine.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "store.json").write_text('{"format": "something else"}')
    (tmp_path / "other" / "config.json").write_text('{"hidden_size": 8}')
    for out in (tmp_path / "runs" / "r2", tmp_path / "store-2", tmp_path / "other" / "hf"):
        assert check_output_dir(out) == out


def test_results_may_be_kept_inside_a_run_but_not_among_what_pretrain_writes(tmp_path):
    """`finetune --output RUN/xnli`: the model cards of the run's exports list such results."""
    run, store = tmp_path / "run", tmp_path / "store"
    run.mkdir()
    (run / "config.json").write_text('{"optim": {}, "run": {}}')
    store.mkdir()
    (store / "store.json").write_text('{"format": "infoxlm-token-store"}')
    assert check_output_dir(run / "xnli", results_of_a_run=True) == run / "xnli"
    for out in (run / "checkpoints" / "xnli", run / "exports" / "xnli", store / "xnli"):
        with pytest.raises(OutputError, match="is inside the"):
            check_output_dir(out, results_of_a_run=True)


def test_a_directory_holding_only_a_run_lock_is_a_run_directory(tmp_path):
    """What a pretrain killed at start-up leaves, or one starting now: the same command may go
    on in it (its lock says whether a live pretrain holds it)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").write_text('{"pid": 4711, "host": "node07"}\n')
    assert is_run_directory(run)
    assert check_output_dir(run, written_by_us=is_run_directory) == run
    assert enclosing_store_or_run(run / "sub") == ("run directory", run)
    (run / "notes.txt").write_text("a user's\n")
    assert not is_run_directory(run)
    with pytest.raises(OutputError, match="infoxlm did not write it"):
        check_output_dir(run, written_by_us=is_run_directory)


# --- a full disk ---------------------------------------------------------------------------------


def _torch_zip_writer_error() -> RuntimeError:
    """What torch.save raises when its stream's write finds the disk full."""
    try:
        Disk(room=100).torch_save(torch.zeros(1000), _Sink())
    except RuntimeError as err:
        return err
    raise AssertionError("torch.save did not fail")


class _Sink:
    def write(self, data):
        return len(memoryview(data))

    def flush(self):
        pass


@pytest.mark.parametrize("make", [
    lambda: enospc(),
    lambda: OSError(errno.EDQUOT, "Disk quota exceeded"),
    _torch_zip_writer_error,  # "[enforce fail at inline_container.cc:…]", the OSError as its context
    lambda: RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file data/0: file write failed"),
    lambda: Exception("Error while serializing: I/O error: No space left on device (os error 28)"),  # safetensors, tokenizers
    lambda: OSError("192000 requested and 20448 written"),  # np.save, a short write
    lambda: OSError("Not enough free space to write 24000000 bytes after offset 128"),  # np.save, checked first
], ids=["ENOSPC", "EDQUOT", "torch zip writer", "torch file write", "safetensors", "numpy short write", "numpy free space"])
def test_no_space_left_knows_each_writers_words(make):
    assert no_space_left(make())


def test_a_checkpoint_ranks_failure_is_looked_into():
    from torch.distributed.checkpoint.api import CheckpointException, _wrap_exception

    try:
        raise _torch_zip_writer_error()
    except RuntimeError as err:
        wrapped = CheckpointException("save failed", {0: _wrap_exception(err)})
    assert no_space_left(wrapped)


@pytest.mark.parametrize("error", [
    OSError(errno.EACCES, "Permission denied"), OSError(errno.EIO, "Input/output error"), ValueError("bad"),
    RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"),
])
def test_other_failures_are_not_a_full_disk(error):
    assert not no_space_left(error)


def test_full_disk_named_says_which_output_once(tmp_path):
    with pytest.raises(NoSpaceLeft, match=r"^no space left on device while writing out/x; the last good one is y$"):
        with full_disk_named("out/x", "the last good one is y"):
            raise enospc()
    with pytest.raises(NoSpaceLeft, match=r"^no space left on device while writing inner$"):
        with full_disk_named("outer"):
            with full_disk_named("inner"):
                raise enospc()
    with pytest.raises(PermissionError):
        with full_disk_named("out/x"):
            raise PermissionError(errno.EACCES, "Permission denied")


def test_atomic_writers_on_a_full_disk_leave_nothing_and_name_the_output(tmp_path):
    """Each writer's temporary, and the parent directories it made, are gone before the error."""
    for writer, out in ((atomic_file, tmp_path / "a" / "b" / "v.npy"), (atomic_dir, tmp_path / "a" / "b" / "hf"),
                        (atomic_files, tmp_path / "a" / "b" / "tok")):
        with pytest.raises(NoSpaceLeft, match=f"^no space left on device while writing {out}$"):
            with writer(out) as tmp:
                target = tmp if writer is atomic_file else tmp / "f"
                target.write_bytes(b"half")
                raise enospc()
        assert list(tmp_path.iterdir()) == []


def test_atomic_files_replace_their_own_names_and_keep_the_rest(tmp_path):
    out = tmp_path / "tok"
    out.mkdir()
    (out / "tokenizer.json").write_text("old")
    (out / "notes.txt").write_text("a user's")
    with pytest.raises(NoSpaceLeft, match=f"writing {out}$"):
        with atomic_files(out) as tmp:
            (tmp / "tokenizer.json").write_text("half")
            raise enospc()
    assert {p.name: p.read_text() for p in out.iterdir()} == {"tokenizer.json": "old", "notes.txt": "a user's"}
    with atomic_files(out) as tmp:
        (tmp / "tokenizer.json").write_text("new")
        (tmp / "report.json").write_text("{}")
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "tokenizer.json": "new", "notes.txt": "a user's", "report.json": "{}"}
    assert list(tmp_path.iterdir()) == [out]


def test_text_written_atomically_is_whole_or_absent_on_a_full_disk(tmp_path, monkeypatch):
    from full_disk import enospc

    from infoxlm.outputs import NoSpaceLeft, write_text_atomically

    target = tmp_path / "out" / "results.md"
    assert write_text_atomically(target, "a\nb\n") == target and target.read_text() == "a\nb\n"
    real_write_text = Path.write_text

    def half_then_full(self, text, *args, **kwargs):
        real_write_text(self, text[:1], *args, **kwargs)
        raise enospc()

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(NoSpaceLeft, match=f"while writing {target}$"):
        write_text_atomically(target, "c\nd\n")
    assert target.read_text() == "a\nb\n" and sorted(p.name for p in target.parent.iterdir()) == ["results.md"]
