"""The paper's ablations: each turns one part of InfoXLM off, as changes to any recipe.

One table, read by ``infoxlm pretrain`` (a ``--no-NAME`` flag each: ``--no-xlco``) and by the
demo (its models are these, alone or together: ``−TLM −Mixup`` is ``no-tlm`` with ``no-mixup``,
as in the paper's Table 5). A change is what :func:`infoxlm.train.config.changed` takes.

>>> ablated("no-tlm", "no-mixup")
('−TLM −Mixup', {'data': {'tlm_batch_size': 0, 'mixup': False}})

This module imports nothing heavy: the command's parser reads it to build its flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ABLATIONS", "Ablation", "Changes", "ablated"]

# Changes to a recipe, as ``train.config.changed`` takes them: {section: {field: value}}.
Changes = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Ablation:
    """One part of the method turned off."""

    name: str  # the pretrain flag (--no-xlco) and the demo's directory: no-xlco
    label: str  # the paper's table row: −XLCO
    says: str  # what is left out, for --help
    changes: Changes


ABLATIONS: dict[str, Ablation] = {
    a.name: a
    for a in (
        Ablation("no-mmlm", "−MMLM", "no monolingual masked LM", {"data": {"mmlm_batch_size": 0}}),
        Ablation("no-tlm", "−TLM", "no translation LM", {"data": {"tlm_batch_size": 0}}),
        Ablation("no-xlco", "−XLCO", "no cross-lingual contrast", {"data": {"xlco_batch_size": 0}}),
        # Mixup and momentum are parts of XLCO: turning them off keeps the contrast.
        Ablation("no-mixup", "−Mixup", "plain translation pairs in XLCO", {"data": {"mixup": False}}),
        Ablation("no-momentum", "−Momentum", "keys from the query encoder", {"contrast": {"use_momentum": False}}),
    )
}


def ablated(*names: str) -> tuple[str, Changes]:
    """The table label and the changes of these ablations together, in the order given."""
    unknown = [name for name in names if name not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation {unknown[0]!r}; expected one of {sorted(ABLATIONS)}")
    changes: Changes = {}
    for name in names:
        for section, fields in ABLATIONS[name].changes.items():
            changes.setdefault(section, {}).update(fields)
    return " ".join(ABLATIONS[name].label for name in names), changes
