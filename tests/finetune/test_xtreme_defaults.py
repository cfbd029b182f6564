"""XTREME's per-task settings: one row for each of the seven tasks, each with its source."""

from __future__ import annotations

import pytest

from infoxlm.finetune.xtreme_defaults import SELECTIONS, XTREME, dev_languages, row, settings_for


def test_every_xtreme_task_has_a_row_with_its_source():
    assert set(XTREME) == {"xnli", "pawsx", "xquad", "mlqa", "tydiqa", "panx", "udpos"}
    for task, values in XTREME.items():
        assert values["selection"] in SELECTIONS
        assert values["batch_size"] == 32  # 8 × 4 (QA 4 × 8) accumulated, in every script
        assert "scripts/train_" in values["source"], task


def test_published_values():
    assert (XTREME["pawsx"]["lr"], XTREME["pawsx"]["epochs"], XTREME["pawsx"]["max_length"]) == (2e-5, 5.0, 128)
    assert (XTREME["tydiqa"]["warmup"], XTREME["tydiqa"]["weight_decay"], XTREME["tydiqa"]["max_length"]) == ("500", 1e-4, 384)
    assert row("xnli", "large")["lr"] == 3e-5 and row("xnli", "base")["lr"] == 2e-5
    assert row("wikiann") == XTREME["panx"]


def test_explicit_values_override_and_selection_languages():
    assert settings_for("pawsx", "base", {"lr": 1e-5, "batch_size": None}) == dict(
        lr=1e-5, batch_size=32, epochs=5.0, warmup="0", weight_decay=0.0)
    assert dev_languages("en-dev", ["de", "fr"]) == ["en"]
    assert dev_languages("all-dev", ["de", "fr"]) == ["de", "fr"]
    assert dev_languages("last", ["de"]) == []
    with pytest.raises(ValueError, match="selection 'best'"):
        dev_languages("best", ["de"])


def test_the_two_tagging_tasks_share_the_settings_their_commands_offer():
    from infoxlm.finetune.tagging_defaults import MAX_LENGTH, SETTINGS
    from infoxlm.finetune.xtreme_defaults import SETTING_KEYS, XTREME

    for task in ("panx", "udpos"):
        assert {k: XTREME[task][k] for k in SETTING_KEYS} == SETTINGS and XTREME[task]["max_length"] == MAX_LENGTH
