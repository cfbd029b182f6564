"""Training checkpoints: sharded, resumable on any number of processes, never half-written.

A checkpoint is a directory ``RUN/checkpoints/step-00001000/`` written with
``torch.distributed.checkpoint`` (DCP): every rank writes the part of the state it holds
(``__R_0.distcp``; under FSDP its shards, under DDP the replicated tensors once) and rank 0 the
index (``.metadata``). The index records each tensor's global shape, so a checkpoint written
by N processes loads into M (DCP reads every rank's slices from whichever files hold them),
and into one process as whole tensors (``load_checkpoint``: export, tests). Besides tensors it
holds plain numbers, strings and lists (step, configs as JSON, the schedule).

Atomic: the ranks write into ``.tmp-step-…`` and rank 0 renames it into place once the index,
written last, is on disk; a directory named ``step-*`` is always complete, and a kill during
a save leaves a ``.tmp-*`` directory that the next save removes. Older checkpoints beyond the
last ``keep`` are deleted only after the new one is in place. With ``asynchronous`` the state
is copied to host memory and written by a background thread while training goes on.

Trusted once checked (checkpoint_integrity.py): each checkpoint holds ``digests.json``, the
SHA-256 of every file, and a resume or export first compares the files with it. A resume
skips a damaged checkpoint for the newest intact one and says so; an export refuses it. Nothing
read here runs pickled code: DCP's index is unpickled with named classes only, its non-tensor
items with ``torch.load(weights_only=True)``. Single-file ``state.pt`` checkpoints (earlier
infoxlm releases) are still listed, resumed and exported (``weights_only=True`` as well).
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import re
import shutil
import sys
import warnings
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
from torch.distributed.tensor import DTensor

from ..json_files import parse_json
from ..outputs import full_disk_named, no_space_left
from .checkpoint_integrity import DIGESTS, INDEX, DigestingWriter, first_line, read_index, verify_files
from .distributed import World, all_reduce_max
from .errors import CheckpointCorrupt, TrainingError, UnsafeCheckpoint

CHECKPOINT_DIR = "checkpoints"
STATE_FILE = "state.pt"  # a single-file checkpoint of an earlier release
SHARDED_INDEX = INDEX  # DCP's index, written last: its presence marks a complete save
_STEP_DIR = re.compile(r"^step-(\d{8})$")


def checkpoint_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"step-{step:08d}"


def is_sharded_checkpoint(directory: Path) -> bool:
    """A checkpoint written with DCP (its index is there), not a single-file one."""
    return (Path(directory) / SHARDED_INDEX).is_file()


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run, oldest first: [(step, directory)]."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    found = []
    for entry in folder.iterdir():
        match = _STEP_DIR.match(entry.name)
        if match and ((entry / STATE_FILE).is_file() or is_sharded_checkpoint(entry)):
            found.append((int(match.group(1)), entry))
    return sorted(found)


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def incomplete_checkpoints(run_dir: Path) -> list[Path]:
    """``step-*`` directories with neither an index nor a state file. No save leaves one (it
    renames its directory into place complete); a lost file or a partial copy does."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    complete = {directory for _, directory in list_checkpoints(run_dir)}
    return sorted(e for e in folder.iterdir() if _STEP_DIR.match(e.name) and e.is_dir() and e not in complete)


# --- checking before reading -----------------------------------------------------------------


def verify_checkpoint(directory: Path, world: World | None = None) -> str | None:
    """Check a checkpoint's files before anything in it is used (checkpoint_integrity.py).

    Raises CheckpointCorrupt naming the damaged file (UnsafeCheckpoint: an index that names
    code); returns a note where the files cannot be verified (no digests: an earlier release's).
    ``world``: every rank calls this and hashes a share of the files."""
    directory = Path(directory)
    if is_sharded_checkpoint(directory):
        if verify_files(directory, world):
            return None
        return f"note: {directory} has no {DIGESTS} (an earlier infoxlm wrote it): its files cannot be verified"
    if (directory / STATE_FILE).is_file():
        return f"note: {directory} is a single-file checkpoint of an earlier release, without digests: it cannot be verified"
    raise CheckpointCorrupt(f"{directory}: incomplete (no {SHARDED_INDEX} index)")


def resume_checkpoint(run_dir: Path, world: World | None = None) -> Path | None:
    """The checkpoint a run resumes from: the newest one that is intact, or None.

    Says on stderr (main rank) which ``step-*`` directories it passes over and why. Refuses
    (CheckpointCorrupt) when every checkpoint is damaged rather than start again from step 0
    over them, and refuses a checkpoint made to run code (UnsafeCheckpoint) wherever it is met."""
    passed = [(d, f"{d}: incomplete (no {SHARDED_INDEX} index)") for d in incomplete_checkpoints(run_dir)]
    chosen, note, damaged = None, None, []
    for _, directory in reversed(list_checkpoints(run_dir)):
        try:
            note = verify_checkpoint(directory, world)
        except UnsafeCheckpoint:
            raise
        except CheckpointCorrupt as err:
            damaged.append((directory, str(err)))
            continue
        chosen = directory
        break
    if damaged and chosen is None:
        raise CheckpointCorrupt(
            f"{damaged[0][1]}; no older checkpoint is intact (move the damaged ones out of {Path(run_dir) / CHECKPOINT_DIR} "
            "to start the run again from step 0)"
        )
    then = f"resuming from {chosen.name}" if chosen is not None else "starting from step 0"
    for directory, reason in sorted(passed + damaged, reverse=True):
        _say(f"warning: {reason}; ignoring {directory.name}, {then}", world)
    if note is not None:
        _say(note, world)
    return chosen


def verified_checkpoint(directory: Path) -> Path:
    """``directory`` once its files are checked, for reading it whole in one process (export).
    A damaged one is refused naming the file, and the newest older checkpoint that is intact."""
    directory = Path(directory)
    try:
        note = verify_checkpoint(directory)
    except UnsafeCheckpoint:
        raise
    except CheckpointCorrupt as err:
        raise CheckpointCorrupt(f"{err}; {_intact_before(directory)}") from None
    if note is not None:
        _say(note)
    return directory


def _intact_before(directory: Path) -> str:
    """The newest checkpoint older than ``directory`` that is intact, in words."""
    for step, older in reversed(list_checkpoints(directory.parent.parent)):
        if older.name >= directory.name:
            continue
        try:
            verify_checkpoint(older)
        except CheckpointCorrupt:
            continue
        return f"the newest intact checkpoint is {older.name} (--step {step})"
    return "no older checkpoint is intact"


def _say(text: str, world: World | None = None) -> None:
    if world is None or world.is_main:
        print(text, file=sys.stderr, flush=True)


# --- writing ---------------------------------------------------------------------------------


class CheckpointWriter:
    """Writes one run's checkpoints; called on every rank (each writes its part).

    ``asynchronous``: ``save`` returns once the state is copied to host memory; a background
    thread writes it (over a gloo group of its own, so that its collectives never interleave
    with training's) and rank 0 renames it into place when the index is written. The next
    ``save`` and ``wait`` first let the previous one finish.
    """

    def __init__(
        self, run_dir: Path, rank: int = 0, distributed: bool = False, *, keep: int = 3, asynchronous: bool = False,
        timeout: timedelta | None = None,
    ):  # fmt: skip
        self.folder = Path(run_dir) / CHECKPOINT_DIR
        self.run_dir, self.rank, self.distributed, self.keep, self.asynchronous = Path(run_dir), rank, distributed, keep, asynchronous
        # Every rank creates the group (a collective), even if it never saves asynchronously;
        # ``timeout``: how long its collectives wait for a rank (run.collective_timeout_s).
        self._group = dist.new_group(backend="gloo", timeout=timeout) if asynchronous and distributed else None
        self._pending = None  # (future, temporary directory, final directory, the last good one) of a background save

    def save(self, step: int, state: dict[str, Any]) -> Path:
        self.wait()
        final = checkpoint_path(self.run_dir, step)
        tmp = self.folder / f".tmp-{final.name}"  # the same name on every rank: they write into one directory
        then = last_good_checkpoint(self.run_dir)  # none of this save is in place yet
        with full_disk_named(final, then), self._removed_on_failure(tmp):
            if self.rank == 0:
                self.folder.mkdir(parents=True, exist_ok=True)
                for leftover in self.folder.glob(".tmp-*"):  # from a save that was killed
                    shutil.rmtree(leftover, ignore_errors=True)
                tmp.mkdir()
            if self.distributed:
                dist.barrier()  # the directory exists before any rank writes into it
            writer = DigestingWriter(tmp, sync_files=True)  # DCP's writer, plus digests.json
            _single_process_quiet()
            if not self.asynchronous:
                dcp.save(state, storage_writer=writer, no_dist=not self.distributed)
                if self.distributed:
                    dist.barrier()  # every rank's part is written (the index is, once save returns on rank 0)
                if self.rank == 0:
                    self._put_in_place(tmp, final)
                return final
            future = dcp.async_save(state, storage_writer=writer, process_group=self._group, no_dist=not self.distributed)
        self._pending = (future, tmp, final, then)
        return final

    def poll(self) -> None:
        """Put a background save that has finished in place (called at every step boundary)."""
        if self._pending is not None and self._pending[0].done():
            self.wait()

    def wait(self) -> None:
        """Let a background save finish; its directory is in place on return. A save that
        failed has its temporary removed and raises (NoSpaceLeft for a full disk)."""
        if self._pending is None:
            return
        (future, tmp, final, then), self._pending = self._pending, None
        with full_disk_named(final, then), self._removed_on_failure(tmp):
            try:
                future.result()
            except (Exception, CheckpointException) as err:  # the latter is not an Exception
                if no_space_left(err):
                    raise  # said by full_disk_named
                raise TrainingError(
                    f"{self.run_dir}: the background save of {final.name} failed ({type(err).__name__}: "
                    f"{first_line(_rank_failure(err))}); {then}"
                ) from None
            # Rank 0's save returns once its index is written, after every rank reported its part.
            if self.rank == 0:
                self._put_in_place(tmp, final)

    def close(self) -> None:
        """After training stopped on an error: let a background save end (in place if it
        succeeded, its temporary removed if not) without raising; the first error counts."""
        try:
            self.wait()
        except (Exception, CheckpointException):
            pass

    @contextlib.contextmanager
    def _removed_on_failure(self, tmp: Path):
        """A save that fails leaves no temporary directory: rank 0 removes it once every rank
        is done with it (DCP reports a rank's failure to all of them after the writes)."""
        try:
            yield
        except BaseException:
            if self.rank == 0:
                shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _put_in_place(self, tmp: Path, final: Path) -> None:
        if final.exists():  # re-saving the same step (e.g. after a resume)
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_directory(self.folder)
        if self.keep > 0:
            for _, old in list_checkpoints(self.run_dir)[: -self.keep]:
                shutil.rmtree(old, ignore_errors=True)


def save_checkpoint(run_dir: Path, step: int, state: dict[str, Any], keep: int = 3) -> Path:
    """Write ``state`` as the checkpoint of ``step`` from one process; keep the newest ``keep``."""
    return CheckpointWriter(run_dir, keep=keep).save(step, state)


# --- reading ---------------------------------------------------------------------------------


def load_checkpoint(directory: Path, map_location: str | torch.device = "cpu", keys: Iterable[str] | None = None) -> dict[str, Any]:
    """A checkpoint's state, whole tensors, in this process alone (no collective).

    ``keys``: only these top-level entries (e.g. the step and the configs, without tensors)."""
    directory = Path(directory)
    if not is_sharded_checkpoint(directory):
        return _load_single_file(directory / STATE_FILE, map_location)
    state: dict[str, Any] = {}
    planner = _SafeEmptyLoadPlanner(keys=set(keys) if keys is not None else None)
    # DCP's own load keeps only the keys the given dict has; this one builds them from the index.
    _read_dcp(directory, lambda reader: _load_state_dict(state, storage_reader=reader, planner=planner, no_dist=True))
    if map_location != "cpu":
        state = _to_device(state, torch.device(map_location))
    return state


def load_sharded_into(directory: Path, state: dict[str, Any], distributed: bool) -> None:
    """Fill ``state`` (shaped like the running model's: DTensors where it is sharded) in place
    from a sharded checkpoint; a collective when ``distributed``."""
    _read_dcp(Path(directory), lambda reader: dcp.load(state, storage_reader=reader, planner=_SafeLoadPlanner(), no_dist=not distributed))


def _read_dcp(directory: Path, read) -> None:
    reader = _SafeFileSystemReader(directory)
    reader.read_metadata()  # its refusal in its own words (DCP would wrap it in an AssertionError)
    _single_process_quiet()
    try:
        read(reader)
    except (Exception, CheckpointException) as err:  # the latter is not an Exception
        cause = _rank_failure(err)
        if isinstance(cause, CheckpointCorrupt):
            raise type(cause)(f"{directory}: {cause}") from None
        if isinstance(cause, pickle.UnpicklingError):  # a tensor item DCP read with weights_only=True
            raise _refusal(cause, str(directory)) from None
        raise CheckpointCorrupt(f"{directory}: cannot read checkpoint ({type(cause).__name__}: {first_line(cause)})") from None


def _single_process_quiet() -> None:
    """DCP warns that it assumes one process whenever no process group exists: that is meant.
    Ignored for the whole process, not around the call: an asynchronous save warns from its own
    thread, after the call returned. Installed at each call (once there, it stays one filter):
    whoever saved the filters before (a caller's catch_warnings, pytest) may have restored them."""
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")


def _rank_failure(err: Exception) -> BaseException:
    """The error a rank raised inside DCP, which reports it wrapped (CheckpointException)."""
    failures = getattr(err, "failures", None)
    if isinstance(failures, dict) and failures:
        wrapped = next(iter(failures.values()))  # (exception, traceback) of the first failed rank
        return wrapped[0] if isinstance(wrapped, tuple) else getattr(wrapped, "exception", wrapped)
    return err


def state_json(state: dict[str, Any], key: str, checkpoint: Path) -> dict[str, Any]:
    """The JSON object a checkpoint keeps as text under ``key`` (its configs, its store identity)."""
    value = parse_json(str(state[key]), f"{checkpoint}/{key}", what=f"the run's {key} as JSON", error=CheckpointCorrupt)
    if not isinstance(value, dict):
        raise CheckpointCorrupt(f"{checkpoint}: its {key} is a JSON {type(value).__name__}; expected an object")
    return value


def _load_single_file(path: Path, map_location) -> dict[str, Any]:
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise _refusal(err, str(path)) from None
    except Exception as err:  # a damaged file can fail in many ways; all mean the same here
        raise CheckpointCorrupt(f"{path}: cannot read checkpoint ({type(err).__name__}: {first_line(err)})") from None


def _to_device(node: Any, device: torch.device) -> Any:
    if isinstance(node, torch.Tensor):
        return node.to(device)
    if isinstance(node, dict):
        return {k: _to_device(v, device) for k, v in node.items()}
    if isinstance(node, list):
        return [_to_device(v, device) for v in node]
    return node


class _SafeFileSystemReader(dcp.FileSystemReader):
    def read_metadata(self, *args: Any, **kwargs: Any):
        metadata = read_index(Path(self.path))
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = dcp.metadata.StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


def _load_plain_object(value: io.BytesIO) -> Any:
    """A checkpoint's non-tensor item: numbers, strings, lists, dicts (weights_only)."""
    try:
        return torch.load(value, weights_only=True)
    except pickle.UnpicklingError as err:
        raise _refusal(err, "an item") from None


def _refusal(err: pickle.UnpicklingError, what: str) -> CheckpointCorrupt:
    """torch.load(weights_only=True)'s refusal in one line, without its advice to turn the
    check off: an object that would run code when unpickled, or damaged data."""
    text = str(err)
    named = re.search(r"GLOBAL ([\w.]+)", text)
    if named:
        return UnsafeCheckpoint(
            f"{what}: holds pickled Python objects besides tensors, numbers and strings ({named.group(1)}); "
            "infoxlm refuses to load it, since unpickling them could run code from the file "
            "(an infoxlm checkpoint never holds any)"
        )
    detail = first_line(text.split("WeightsUnpickler error:", 1)[-1])
    return CheckpointCorrupt(f"{what}: cannot read checkpoint (damaged or not a checkpoint: {detail})")


class _SafeLoadPlanner(DefaultLoadPlanner):
    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        obj = _load_plain_object(value)
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._nested_dict import set_element

            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj


class _SafeEmptyLoadPlanner(_EmptyStateDictLoadPlanner, _SafeLoadPlanner):
    """Builds the state from the index (every tensor allocated whole), non-tensors read safely."""


def _fsync_directory(path: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def last_good_checkpoint(run_dir: Path | None) -> str:
    """Where the run can be resumed from, in words: the newest checkpoint that exists."""
    if run_dir is None:
        return "no checkpoint kept (no run directory)"
    found = latest_checkpoint(run_dir)
    return f"the last good checkpoint is {found}" if found is not None else f"no checkpoint was saved in {run_dir}"


def non_finite_tensors(state: Any, prefix: str = "") -> list[str]:
    """Names of the floating-point tensors in a (nested) state dict holding NaN or ±inf; a
    sharded tensor is checked on this rank's shard. One device-to-host read for all of them."""
    names, tensors = [], []

    def walk(node: Any, name: str) -> None:
        if isinstance(node, torch.Tensor):
            local = node.to_local() if isinstance(node, DTensor) else node
            if local.is_floating_point() and local.numel():
                names.append(name)
                tensors.append(local)
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{name}.{key}" if name else str(key))
        elif isinstance(node, (list, tuple)):
            for j, value in enumerate(node):
                walk(value, f"{name}.{j}")

    walk(state, prefix)
    if not tensors:
        return []
    finite = torch.stack([torch.isfinite(t).all() for t in tensors]).cpu().tolist()
    return [name for name, ok in zip(names, finite) if not ok]


def refuse_non_finite(state: Any, where: str, then: str, world: World | None = None) -> None:
    """Raise TrainingError ``WHERE: NAME holds non-finite values (and N more tensors); THEN``
    if a (nested) state holds NaN or ±inf: a checkpoint or an export promises good weights.

    ``world``: every rank calls this with its part of the state (under FSDP its shards, or for
    an export the whole state gathered on rank 0 and nothing on the others) and all of them
    raise if any found one, so that none waits for the others in the next collective."""
    bad = non_finite_tensors(state)
    anywhere = bool(bad)
    if world is not None and world.distributed:  # every rank takes part before any raises
        anywhere = all_reduce_max(torch.tensor([len(bad)], device=world.device), world).item() > 0
    if bad:
        raise TrainingError(f"{where}: {bad[0]} holds non-finite values (and {len(bad) - 1} more tensors); {then}")
    if anywhere:
        raise TrainingError(f"{where}: another rank's part of the state holds non-finite values; {then}")
