"""``infoxlm pretrain``'s arguments: the ablation flags, read from train/ablations.py as the demo reads them."""

from __future__ import annotations

import pytest

from infoxlm.cli import build_parser
from infoxlm.commands.pretrain import resolved_config
from infoxlm.train.ablations import ABLATIONS
from infoxlm.train.config import changed
from infoxlm.train.presets import preset


def _config(*flags: str):
    return resolved_config(build_parser().parse_args(["pretrain", "--preset", "test", *flags]))


def test_every_ablation_of_the_table_is_a_flag_with_its_label():
    pretrain = build_parser()._subparsers._group_actions[0].choices["pretrain"]
    group = next(g for g in pretrain._action_groups if g.title == "ablations (the paper's)")
    helps = {action.option_strings[0]: action.help for action in group._group_actions}
    del helps["--contrast-layer"]  # a value, not an ablation: the demo's last-layer model sets it
    assert helps == {f"--{a.name}": f"{a.label}: {a.says}" for a in ABLATIONS.values()}
    assert helps["--no-xlco"] == "−XLCO: no cross-lingual contrast"


@pytest.mark.parametrize("name", sorted(ABLATIONS))
def test_an_ablation_flag_trains_the_table_s_changes(name):
    assert _config(f"--{name}") == changed(preset("test"), **ABLATIONS[name].changes)
    assert _config(f"--{name}") != preset("test")


def test_ablation_flags_win_over_set_and_combine():
    config = _config("--set", "data.mixup=true", "--no-tlm", "--no-mixup")
    assert not config.data.mixup and config.data.tlm_batch_size == 0 and config.data.xlco_batch_size > 0


@pytest.mark.parametrize("name, flags", [
    ("no-xlco", ["--no-xlco"]), ("no-tlm", ["--no-tlm"]), ("no-mixup", ["--no-tlm", "--no-mixup"]),
    ("no-momentum", ["--no-tlm", "--no-momentum"]),
])
def test_the_demo_s_ablations_train_what_the_flags_of_their_label_train(name, flags):
    """One table: the demo's model NAME (``--setting paper``) and ``infoxlm pretrain --preset
    paper-demo`` with the flags of its label (−TLM −Mixup: --no-tlm --no-mixup) train one config."""
    from infoxlm.demo.run import train_config
    from infoxlm.demo.settings import PAPER

    label, changes = next((label, changes) for model, label, changes in PAPER.models if model == name)
    assert label == " ".join(ABLATIONS[flag[2:]].label for flag in flags)
    args = build_parser().parse_args(["pretrain", "--preset", PAPER.preset, "--seed", "0", *flags])
    assert resolved_config(args) == train_config(PAPER, 0, changes)
