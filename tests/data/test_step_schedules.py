"""Tests for infoxlm.data.step_schedules: piecewise values over steps and late languages."""

from __future__ import annotations

import pytest

from infoxlm.data.step_schedules import Piecewise, active_names, language_starts


def test_a_piecewise_value_holds_from_each_step_until_the_next():
    schedule = Piecewise.parse(" 0:0.3, 10:0.15 ,20:0.05", "mask_schedule")
    assert schedule == Piecewise((0, 10, 20), (0.3, 0.15, 0.05))
    assert [schedule.at(t) for t in (0, 9, 10, 19, 20, 10**9)] == [0.3, 0.3, 0.15, 0.15, 0.05, 0.05]
    assert Piecewise.parse("0:0.7", "alpha_schedule").at(123) == 0.7


@pytest.mark.parametrize(
    "text,message",
    [("", "STEP:VALUE"), ("5:0.3", "must start at step 0"), ("0:0.3,20:0.2,20:0.1", "steps must increase"),
     ("0:0.3,x:0.2", "'x:0.2' is not STEP:VALUE"), ("0:0.3,20", "'20' is not STEP:VALUE")],
)  # fmt: skip
def test_a_malformed_schedule_says_which_piece(text, message):
    with pytest.raises(ValueError, match=message):
        Piecewise.parse(text, "mask_schedule")


def test_language_starts_and_which_corpora_are_live():
    starts = language_starts("sw:100,yo:200")
    assert starts == {"sw": 100, "yo": 200} and language_starts(None) == {} == language_starts("")
    corpora = [("de",), ("sw",), ("en", "sw"), ("en", "de")]
    assert active_names(corpora, starts, 99) == (True, False, False, True)
    assert active_names(corpora, starts, 100) == (True, True, True, True)
    for bad in ("sw", "sw:-1", ":5", "sw:1,sw:2"):
        with pytest.raises(ValueError, match="language_starts"):
            language_starts(bad)
