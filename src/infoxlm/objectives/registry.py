"""The objectives a run trains, built from its config: the registered builders, in order.

Each builder takes the run's config (a ``train.config.TrainConfig``) and the query encoder
and returns its objective, or None when the config leaves it off (MMLM, TLM and XLCO are on
when their batch size is positive: ``data.*_batch_size``). The joint loss and the console
list the objectives in this order. Adding an objective is one file in this package with a
class of ``Objective`` (objective.py) and one ``register`` call; its builder reads what it
needs from the config (``docs/architecture.md``, "Adding an objective", has a worked one).

    >>> list(BUILDERS)
    ['mmlm', 'tlm', 'xlco']
"""

from __future__ import annotations

from typing import Any, Callable

from ..model.encoder import Encoder
from .masked_lm import MaskedLM
from .objective import Objective
from .translation_ranking import TranslationRanking
from .xlco import ContrastSettings, MomentumContrast

__all__ = ["BUILDERS", "build_objectives", "contrast_objective", "register", "unregister"]

Builder = Callable[[Any, Encoder], "Objective | None"]


def contrast_objective(encoder: Encoder, settings: ContrastSettings, weight: float = 1.0) -> MomentumContrast:
    """XLCO for these options: the paper's momentum contrast, or with any option of the
    translation-ranking family (in-step negatives, symmetric, a margin) its extension."""
    ranking = settings.in_batch_negatives or settings.symmetric or settings.margin > 0
    return (TranslationRanking if ranking else MomentumContrast)(encoder, settings, weight)


def _masked_lm(name: str) -> Builder:
    def build(config, encoder: Encoder) -> MaskedLM | None:
        if config.data.batch_size(name) == 0:
            return None
        return MaskedLM(name, getattr(config.objectives, f"{name}_weight"))

    return build


def _xlco(config, encoder: Encoder) -> MomentumContrast | None:
    if config.data.xlco_batch_size == 0:
        return None
    return contrast_objective(encoder, config.contrast, config.objectives.xlco_weight)


BUILDERS: dict[str, Builder] = {"mmlm": _masked_lm("mmlm"), "tlm": _masked_lm("tlm"), "xlco": _xlco}


def register(name: str, build: Builder) -> None:
    """Add an objective's builder after the others; a ValueError if the name is taken."""
    if name in BUILDERS:
        raise ValueError(f"an objective named {name!r} is registered already")
    BUILDERS[name] = build


def unregister(name: str) -> None:
    """Remove an objective added with ``register`` (the built-in ones stay)."""
    if name in ("mmlm", "tlm", "xlco"):
        raise ValueError(f"{name!r} is a built-in objective")
    BUILDERS.pop(name, None)


def build_objectives(config, encoder: Encoder) -> list[Objective]:
    """The run's objectives, in registration order (a ValueError names a value one cannot take)."""
    built = (build(config, encoder) for build in BUILDERS.values())
    return [objective for objective in built if objective is not None]
