"""Inputs several hostile-input test files share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def tatoeba(tmp_path) -> Path:
    data = tmp_path / "tatoeba"
    data.mkdir()
    (data / "tatoeba.deu-eng.deu").write_text("Die Katze schläft.\nÖffne die Datei.\n")
    (data / "tatoeba.deu-eng.eng").write_text("The cat sleeps.\nOpen the file.\n")
    return data
