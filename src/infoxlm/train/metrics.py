"""Per-step metrics: JSON lines always, TensorBoard event files when tensorboard is installed,
and Weights & Biases when asked for (``run.wandb=true``)."""

from __future__ import annotations

import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import InfoXLMError
from ..json_files import parse_json
from ..outputs import atomic_file

# How long closing may wait for TensorBoard's writer thread: an interrupted run must end
# within seconds, and a writer whose queue an interrupt left inconsistent never finishes.
TENSORBOARD_CLOSE_TIMEOUT_S = 5.0


class MetricsLog:
    """Appends one JSON object per logged step to RUN/metrics.jsonl (and RUN/tensorboard/).

    ``resume_step``: the step the run continues from. Lines of later steps (logged by a run
    killed after its last checkpoint) are dropped from metrics.jsonl first, and TensorBoard
    purges its events of those steps, so that every step appears once.
    """

    def __init__(self, run_dir: Path, enabled: bool = True, resume_step: int = 0, wandb: "WandbSink | None" = None):
        self.enabled = enabled
        self._file = None
        self._tensorboard = None
        self._wandb = wandb
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "metrics.jsonl"
        truncate_metrics(path, resume_step)
        self._file = open(path, "a", encoding="utf-8")
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional: pip install 'infoxlm[tb]'
            return
        # Steps are logged after they ran (1 …); events of steps after resume_step are hidden.
        self._tensorboard = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=resume_step + 1)

    def write(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        self._file.write(json.dumps({"step": step, "time": time.time(), **metrics}) + "\n")
        self._file.flush()
        if self._tensorboard is not None:
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
            closing = threading.Thread(target=writer.close, name="close-tensorboard", daemon=True)
            closing.start()
            closing.join(timeout)
        if self._wandb is not None:
            self._wandb.close()
            self._wandb = None


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
        with atomic_file(path) as tmp:
            tmp.write_text("".join(kept), encoding="utf-8")


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
