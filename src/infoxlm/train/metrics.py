"""Per-step metrics: JSON lines always, TensorBoard event files when tensorboard is installed."""

from __future__ import annotations

import json
import time
from pathlib import Path


class MetricsLog:
    """Appends one JSON object per logged step to RUN/metrics.jsonl (and RUN/tensorboard/)."""

    def __init__(self, run_dir: Path, enabled: bool = True):
        self.enabled = enabled
        self._file = None
        self._tensorboard = None
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

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
