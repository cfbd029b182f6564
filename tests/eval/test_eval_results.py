"""Transfer gap, averages and seed means."""

from __future__ import annotations

import pytest

from infoxlm.eval.results import average, markdown_table, mean_over_seeds, std_over_seeds, transfer_gap


def test_transfer_gap_is_english_minus_mean_of_others():
    assert transfer_gap({"en": 86.4, "fr": 80.3, "ur": 67.3}) == pytest.approx(86.4 - (80.3 + 67.3) / 2)
    assert transfer_gap({"fr": 80.0}) is None and transfer_gap({"en": 80.0}) is None
    assert average({"en": 1.0, "de": 2.0}) == 1.5


def test_mean_over_seeds_nested_and_std():
    runs = [
        {"test": {"en": 80.0, "de": 70.0}, "gap": 10.0, "setting": "x", "maybe": None},
        {"test": {"en": 84.0, "de": 72.0}, "gap": 12.0, "setting": "x", "maybe": 1.0},
    ]
    assert mean_over_seeds(runs) == {"test": {"en": 82.0, "de": 71.0}, "gap": 11.0, "setting": "x"}
    assert std_over_seeds([{"a": 1.0}, {"a": 3.0}]) == {"a": pytest.approx(2 ** 0.5)}
    assert std_over_seeds([{"a": 1.0}]) == {"a": 0.0}


def test_markdown_table():
    assert markdown_table(["a", "b"], [["x", 1.234], ["y", None]]) == "| a | b |\n|---|---|\n| x | 1.2 |\n| y | – |"
