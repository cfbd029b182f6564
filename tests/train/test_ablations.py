"""The paper's ablations as one table (train/ablations.py): each changes only the fields it
names, and several together are the paper's combined rows."""

from __future__ import annotations

import pytest

from infoxlm.train.ablations import ABLATIONS, ablated
from infoxlm.train.config import changed
from infoxlm.train.presets import preset


def _fields(config) -> dict[tuple[str, str], object]:
    return {(section, field): value for section, fields in config.to_dict().items() for field, value in fields.items()}


@pytest.mark.parametrize("name", sorted(ABLATIONS))
def test_an_ablation_changes_only_the_fields_it_names_and_each_away_from_the_recipe(name):
    recipe = _fields(preset("base"))
    ablation = _fields(changed(preset("base"), **ABLATIONS[name].changes))
    named = {(section, field) for section, fields in ABLATIONS[name].changes.items() for field in fields}
    assert named and {key for key in recipe if recipe[key] != ablation[key]} == named


def test_ablations_together_are_the_paper_s_combined_rows():
    assert ablated("no-xlco") == ("−XLCO", {"data": {"xlco_batch_size": 0}})
    assert ablated("no-tlm", "no-momentum") == (
        "−TLM −Momentum", {"data": {"tlm_batch_size": 0}, "contrast": {"use_momentum": False}}
    )
    assert ablated() == ("", {})
    with pytest.raises(ValueError, match="unknown ablation 'no-mlm'; expected one of"):
        ablated("no-tlm", "no-mlm")
