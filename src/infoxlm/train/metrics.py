"""Per-step metrics: JSON lines always, TensorBoard event files when tensorboard is installed,
and Weights & Biases when asked for (``run.wandb=true``)."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from ..errors import InfoXLMError


class MetricsLog:
    """Appends one JSON object per logged step to RUN/metrics.jsonl (and RUN/tensorboard/)."""

    def __init__(self, run_dir: Path, enabled: bool = True, wandb: "WandbSink | None" = None):
        self.enabled = enabled
        self._file = None
        self._tensorboard = None
        self._wandb = wandb
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional: pip install 'infoxlm[tb]'
            return
        self._tensorboard = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

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

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        if self._wandb is not None:
            self._wandb.close()
            self._wandb = None


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
