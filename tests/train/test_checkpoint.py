"""Checkpoints: atomic, complete or absent, the newest k kept."""

from __future__ import annotations

import torch

from infoxlm.train.checkpoint import (
    CHECKPOINT_DIR,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)

import pytest


def test_save_load_and_keep_last_k(tmp_path):
    for step in (10, 20, 30, 40):
        save_checkpoint(tmp_path, step, {"step": step, "w": torch.full((3,), float(step))}, keep=2)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [30, 40]
    state = load_checkpoint(latest_checkpoint(tmp_path))
    assert state["step"] == 40 and torch.equal(state["w"], torch.full((3,), 40.0))


def test_a_killed_save_leaves_the_last_good_checkpoint(tmp_path):
    save_checkpoint(tmp_path, 10, {"step": 10})
    # What a kill in the middle of writing step 20 leaves behind: a hidden temporary directory.
    partial = tmp_path / CHECKPOINT_DIR / ".tmp-step-00000020-999"
    partial.mkdir()
    (partial / "state.pt").write_bytes(b"\x80\x02truncated")
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 10
    save_checkpoint(tmp_path, 20, {"step": 20})
    assert not partial.exists()
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 20


def test_no_checkpoint_and_unreadable_checkpoint(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    path = save_checkpoint(tmp_path, 5, {"step": 5})
    (path / "state.pt").write_bytes(b"garbage")
    from infoxlm.train.checkpoint import CheckpointCorrupt

    with pytest.raises(CheckpointCorrupt, match="state.pt: cannot read checkpoint"):
        load_checkpoint(path)
