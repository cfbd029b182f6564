"""Tests for infoxlm.train.save_schedule: checkpoints by steps, by wall time, and at the end."""

from __future__ import annotations

import contextlib
import io

from test_loop import structured_store

from infoxlm.train.checkpoint import list_checkpoints
from infoxlm.train.config import apply_overrides
from infoxlm.train.distributed import World
from infoxlm.train.loop import pretrain
from infoxlm.train.presets import PRESETS, preset
from infoxlm.train.save_schedule import SaveSchedule


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_clock_saves_between_step_checkpoints_and_starts_again_after_each_save():
    clock = Clock()
    schedule = SaveSchedule(save_every=100, minutes=10, max_steps=1000, clock=clock)
    saved = []
    for step in range(1, 301):
        clock.now += 7.0  # 7 s a step: 10 minutes after 86 steps (602 s)
        if schedule.due(step, World()):
            saved.append(step)
            schedule.saved()
    assert saved == [86, 100, 186, 200, 286, 300]
    off = SaveSchedule(save_every=100, minutes=0, max_steps=150, clock=clock)
    clock.now += 1e6
    assert [s for s in range(1, 151) if off.due(s, World())] == [100, 150]


def test_every_preset_saves_by_the_clock_and_more_often_than_once():
    for name in PRESETS:
        run = preset(name).run
        assert run.save_every_minutes == 10.0, name
    assert preset("demo").run.save_every < preset("demo").optim.max_steps


def test_a_run_saves_by_the_clock(tmp_path):
    """save_every_minutes so small that every step's end is past it: a checkpoint after each."""
    store = structured_store(tmp_path / "store")
    config = apply_overrides(preset("test"), ["optim.max_steps=4", "run.save_every=100", "run.save_every_minutes=1e-9",
                                              "run.keep_checkpoints=0"])
    with contextlib.redirect_stdout(io.StringIO()):
        pretrain(config, store, tmp_path / "run", progress=False)
    assert [step for step, _ in list_checkpoints(tmp_path / "run")] == [1, 2, 3, 4]
