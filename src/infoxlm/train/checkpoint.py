"""Training checkpoints that a crash cannot corrupt.

A checkpoint is one directory ``RUN/checkpoints/step-00001000/`` holding ``state.pt``: plain
tensors, numbers, strings and containers only (model, key encoder, projections, queue and its
pointer, optimizer, scheduler, step, RNG states, data position, the resolved config as JSON),
so it is read back with ``torch.load(weights_only=True)``. It is written under a hidden
temporary name, flushed to disk and renamed into place: a directory named ``step-*`` is
always complete, and a kill during a save leaves at most a ``.tmp-*`` directory that the next
save removes. Older checkpoints beyond the last ``keep`` are deleted only after the new one is
in place.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from ..errors import InfoXLMError
from .errors import TrainingError

CHECKPOINT_DIR = "checkpoints"
STATE_FILE = "state.pt"
_STEP_DIR = re.compile(r"^step-(\d{8})$")


class CheckpointCorrupt(InfoXLMError):
    """A checkpoint file that cannot be read."""


def checkpoint_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"step-{step:08d}"


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run, oldest first: [(step, directory)]."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    found = []
    for entry in folder.iterdir():
        match = _STEP_DIR.match(entry.name)
        if match and (entry / STATE_FILE).is_file():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def save_checkpoint(run_dir: Path, step: int, state: dict[str, Any], keep: int = 3) -> Path:
    """Write ``state`` as the checkpoint of ``step`` atomically; keep the newest ``keep``."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for leftover in folder.glob(".tmp-*"):  # from a save that was killed
        shutil.rmtree(leftover, ignore_errors=True)
    final = checkpoint_path(run_dir, step)
    tmp = folder / f".tmp-{final.name}-{os.getpid()}"
    tmp.mkdir()
    with open(tmp / STATE_FILE, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    if final.exists():  # re-saving the same step (e.g. after a resume)
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_directory(folder)
    for _, old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(directory: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(directory) / STATE_FILE
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        if "Unsupported global" in text:
            # torch's message advises weights_only=False: that would run whatever the file names.
            raise CheckpointCorrupt(
                f"{path}: holds pickled Python objects besides tensors, numbers and strings; infoxlm "
                "refuses to load it, since unpickling them could run code from the file "
                "(an infoxlm checkpoint never holds any)"
            ) from None
        detail = text.split("WeightsUnpickler error:", 1)[-1] if "WeightsUnpickler error:" in text else text
        raise CheckpointCorrupt(f"{path}: cannot read checkpoint (damaged or not a checkpoint: {_first_line(detail)})") from None
    except Exception as err:  # a damaged file can fail in many ways; all mean the same here
        raise CheckpointCorrupt(f"{path}: cannot read checkpoint ({type(err).__name__}: {_first_line(err)})") from None

def _first_line(err: Exception | str) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else "no detail"


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
    """Names of the floating-point tensors in a (nested) state dict holding NaN or ±inf.

    One device-to-host read for all of them."""
    names, tensors = [], []

    def walk(node: Any, name: str) -> None:
        if isinstance(node, torch.Tensor):
            if node.is_floating_point() and node.numel():
                names.append(name)
                tensors.append(node)
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


def refuse_non_finite(state: Any, where: str, then: str) -> None:
    """Raise TrainingError ``WHERE: NAME holds non-finite values (and N more tensors); THEN``
    if a (nested) state holds NaN or ±inf: a checkpoint or an export promises good weights."""
    bad = non_finite_tensors(state)
    if bad:
        raise TrainingError(f"{where}: {bad[0]} holds non-finite values (and {len(bad) - 1} more tensors); {then}")
