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


class _Arbitrary:
    """A picklable object that is not a tensor: what weights_only=True refuses."""


def test_a_pickled_object_is_refused_with_the_reason(tmp_path):
    from infoxlm.train.checkpoint import CheckpointCorrupt

    path = save_checkpoint(tmp_path, 5, {"step": 5})
    torch.save({"step": 5, "thing": _Arbitrary()}, path / "state.pt")
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    message = str(caught.value)
    assert "could run code from the file" in message and "weights_only=False" not in message
    assert len(message.splitlines()) == 1


def test_a_damaged_checkpoint_is_one_line_without_torchs_advice(tmp_path):
    from infoxlm.train.checkpoint import CheckpointCorrupt

    path = save_checkpoint(tmp_path, 5, {"step": 5})
    (path / "state.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    assert "weights_only" not in str(caught.value) and len(str(caught.value).splitlines()) == 1
