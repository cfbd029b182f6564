"""Vectors on disk as they are made: resumed after the last whole piece, made afresh for other inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from infoxlm import interrupt
from infoxlm.errors import InfoXLMError
from infoxlm.eval.saved_embeddings import SavedEmbeddings, check_embeddings_dir

IDENTITY = {"model": {"path": "/m", "files": [["model.safetensors", 10, 1]]}, "layer": 3, "digest": "abc"}


def opened(directory, identity=IDENTITY, rows=5, dim=4, piece=2, dtype="float16"):
    return SavedEmbeddings.open(directory, "src", identity, rows=rows, dim=dim, piece=piece, dtype=dtype)


def test_a_second_open_resumes_after_the_last_whole_piece(tmp_path):
    vectors = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    first = opened(tmp_path)
    first.append(vectors[:2])
    first.append(vectors[2:4])
    with open(first.path, "ab") as f:  # half of the next piece's first row, as a kill mid-write leaves it
        f.write(b"\x00" * 3)
    again = opened(tmp_path)
    assert again.done == 4 and again.fresh_reason is None and again.path.stat().st_size == 4 * 4 * 2
    again.append(vectors[4:])
    assert again.complete
    loaded = again.load()
    expected = vectors.astype(np.float16).astype(np.float32)
    torch.testing.assert_close(loaded, torch.nn.functional.normalize(torch.from_numpy(expected), dim=1))


def test_rows_past_a_whole_piece_are_made_again(tmp_path):
    # A piece is embedded alone (its batches sorted inside it): a piece cut short is redone whole.
    saved = opened(tmp_path, piece=3, rows=7)
    saved.append(np.ones((3, 4), np.float32))
    with open(saved.path, "ab") as f:
        f.write(np.ones((2, 4), np.float16).tobytes())  # two rows of the next piece of three
    assert opened(tmp_path, piece=3, rows=7).done == 3


@pytest.mark.parametrize(("change", "said"), [(dict(identity={**IDENTITY, "digest": "abd"}), "other sentences"),
                                              (dict(identity={**IDENTITY, "layer": 4}), "layer 3, not 4"),
                                              (dict(dtype="float32"), "dtype 'float16', not 'float32'"),
                                              (dict(piece=3), "piece 2, not 3")])
def test_vectors_made_of_anything_else_are_made_afresh(tmp_path, change, said):
    saved = opened(tmp_path)
    saved.append(np.ones((2, 4), np.float32))
    again = opened(tmp_path, **change)
    assert again.done == 0 and said in again.fresh_reason and again.path.stat().st_size == 0
    assert json.loads((tmp_path / "src.json").read_text())["rows"] == 5


def test_a_ctrl_c_during_a_write_waits_for_the_piece(tmp_path, monkeypatch):
    saved = opened(tmp_path)
    monkeypatch.setattr(interrupt, "requested", True)  # a Ctrl-C arrived while the piece was written
    with pytest.raises(KeyboardInterrupt):
        saved.append(np.ones((2, 4), np.float32))
    assert saved.done == 2 and saved.path.stat().st_size == 2 * 4 * 2


def test_a_piece_of_the_wrong_shape_is_refused(tmp_path):
    saved = opened(tmp_path)
    with pytest.raises(ValueError, match="width 4"):
        saved.append(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="up to 5"):
        saved.append(np.ones((6, 4), np.float32))
    with pytest.raises(ValueError, match="0 of 5 rows"):
        saved.load()


def test_a_directory_of_other_files_or_a_file_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(InfoXLMError, match="holds notes.txt, not vectors of infoxlm mine"):
        check_embeddings_dir(tmp_path)
    with pytest.raises(InfoXLMError, match="is a file"):
        check_embeddings_dir(tmp_path / "notes.txt")
    check_embeddings_dir(tmp_path / "new")  # not there yet: fine
    opened(tmp_path / "ours")
    check_embeddings_dir(tmp_path / "ours")
