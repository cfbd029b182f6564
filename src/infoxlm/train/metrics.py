"""Per-step metrics: JSON lines always, TensorBoard event files when tensorboard is installed,
and Weights & Biases when asked for (``run.wandb=true``)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import InfoXLMError
from ..json_files import parse_json
from ..outputs import full_disk_named, no_space_left, write_text_atomically

# How long closing may wait for TensorBoard's writer thread: an interrupted run must end
# within seconds, and a writer whose queue an interrupt left inconsistent never finishes.
TENSORBOARD_CLOSE_TIMEOUT_S = 5.0


class MetricsLog:
    """Appends one JSON object per logged step to RUN/metrics.jsonl (and RUN/tensorboard/).

    ``resume_step``: the step the run continues from. Lines of later steps (logged by a run
    killed after its last checkpoint) are dropped from metrics.jsonl first, and TensorBoard
    purges its events of those steps, so that every step appears once. Each line is appended
    whole or not at all: a write that fails (a full disk) is cut off again before it raises.
    """

    def __init__(self, run_dir: Path, enabled: bool = True, resume_step: int = 0, wandb: "WandbSink | None" = None):
        self.enabled = enabled
        self._file = None
        self._tensorboard = None
        self._wandb = wandb
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / "metrics.jsonl"
        truncate_metrics(self.path, resume_step)
        with full_disk_named(self.path):
            self._file = open(self.path, "ab", buffering=0)  # each line goes to the file system at once
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional: pip install 'infoxlm[tb]'
            return
        self._tensorboard_dir = run_dir / "tensorboard"
        with full_disk_named(self._tensorboard_dir):
            # Steps are logged after they ran (1 …); events of steps after resume_step are hidden.
            self._tensorboard = SummaryWriter(log_dir=str(self._tensorboard_dir), purge_step=resume_step + 1)
        self._thread_hook = threading.excepthook
        threading.excepthook = _quiet_writer_thread(self._thread_hook)

    def write(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        line = json.dumps({"step": step, "time": time.time(), **metrics}) + "\n"
        with full_disk_named(self.path):
            _append_whole(self._file, line.encode("utf-8"))
        if self._tensorboard is not None:
            with full_disk_named(self._tensorboard_dir):  # the writer thread's error, raised here
                for name, value in metrics.items():
                    self._tensorboard.add_scalar(name, value, step)
        if self._wandb is not None:
            self._wandb.log(step, metrics)

    def close(self, timeout: float = TENSORBOARD_CLOSE_TIMEOUT_S) -> None:
        """Close the JSON file, then TensorBoard's writer, waiting at most ``timeout`` seconds
        for it (its thread is a daemon: a writer that does not finish is abandoned)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        writer, self._tensorboard = self._tensorboard, None
        if writer is not None:
            closing = threading.Thread(target=_close_unless_full, args=(writer,), name="close-tensorboard", daemon=True)
            closing.start()
            closing.join(timeout)
            threading.excepthook = self._thread_hook
        if self._wandb is not None:
            self._wandb.close()
            self._wandb = None


def _quiet_writer_thread(hook):
    """``hook`` (a threading.excepthook), except for a full disk met by TensorBoard's writer
    thread: the thread keeps that error and the next add_scalar raises it, where it is said in
    one line; printed from the thread as well, it would come with a traceback."""

    def quiet(args) -> None:
        if not (type(args.thread).__module__.startswith("tensorboard.") and no_space_left(args.exc_value)):
            hook(args)

    return quiet


def _close_unless_full(writer) -> None:
    """Close TensorBoard's writer; one that found the disk full has said so (see above)."""
    try:
        writer.close()
    except Exception as err:
        if not no_space_left(err):
            raise


def _append_whole(file, data: bytes) -> None:
    """Append ``data`` to an unbuffered file, or cut a partial write back off and raise: a torn
    last line would be read as the end of the log by anything that follows it."""
    size = os.fstat(file.fileno()).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[file.write(view):]  # a full disk takes part of a write, then refuses
    except BaseException:
        with contextlib.suppress(OSError):  # shrinking a file needs no space
            file.truncate(size)
        raise


def truncate_metrics(path: Path, last_step: int) -> None:
    """Keep the lines of metrics.jsonl up to ``last_step`` (and drop a torn last line)."""
    if not path.is_file():
        return
    kept, dropped = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(keepends=True), start=1):
        try:
            step = parse_json(line, str(path), what="a metrics record", line=number)["step"]
        except (InfoXLMError, KeyError, TypeError):
            dropped = True  # a line cut short by a kill
            continue
        if step <= last_step and line.endswith("\n"):
            kept.append(line)
        else:
            dropped = True
    if dropped:
        write_text_atomically(path, "".join(kept))


class WandbSink:
    """The metrics of metrics.jsonl, step by step, and the resolved config, in a W&B run.

    The run's files go under RUN/wandb/; its id is kept in RUN/wandb-id, so a resumed training
    run continues the same W&B run. ``WANDB_MODE=offline`` writes it locally for ``wandb sync``.
    """

    ID_FILE = "wandb-id"

    def __init__(self, run_dir: Path, config: dict[str, Any], *, project: str, name: str | None = None,
                 entity: str | None = None):
        try:
            import wandb
        except ImportError:
            raise InfoXLMError('run.wandb=true needs the wandb package: pip install "infoxlm[wandb]"') from None
        run_dir.mkdir(parents=True, exist_ok=True)
        id_file = run_dir / self.ID_FILE
        run_id = id_file.read_text().strip() if id_file.is_file() else secrets.token_hex(4)
        id_file.write_text(run_id + "\n")
        self._run = wandb.init(
            project=project, name=name or run_dir.resolve().name, entity=entity, id=run_id, resume="allow",
            dir=str(run_dir), config=config,
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self._run.log(dict(metrics), step=step)

    def close(self) -> None:
        self._run.finish()
