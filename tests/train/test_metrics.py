"""The metrics log: each step once after a resume, and a close that cannot hang."""

from __future__ import annotations

import json
import threading
import time

from infoxlm.train.metrics import MetricsLog


def test_resume_drops_the_lines_of_steps_after_the_checkpoint(tmp_path):
    log = MetricsLog(tmp_path)
    for step in range(1, 6):
        log.write(step, {"loss/mmlm": float(step)})
    log.close()
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 6, "loss')  # torn by a kill
    log = MetricsLog(tmp_path, resume_step=3)
    log.write(4, {"loss/mmlm": 4.5})
    log.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and rows[-1]["loss/mmlm"] == 4.5


class _StuckWriter:
    """A TensorBoard writer whose close never returns (its thread's queue left inconsistent)."""

    def __init__(self):
        self.release = threading.Event()

    def close(self):
        self.release.wait()


def test_close_does_not_wait_forever_for_tensorboard(tmp_path):
    log = MetricsLog(tmp_path)
    if log._tensorboard is not None:
        log._tensorboard.close()
    stuck = log._tensorboard = _StuckWriter()
    closing = threading.Thread(target=log.close, daemon=True)  # the default timeout
    started = time.monotonic()
    closing.start()
    closing.join(10)
    stuck.release.set()
    assert not closing.is_alive() and time.monotonic() - started < 9
