"""The contrast's three families, as ``contrast.*`` values to lay over any preset.

Each is a set of ``--set`` lines (``recipe_overrides``); what a recipe leaves out (the layer,
the queue's size and the momentum, where it keeps them) stays the preset's. The pre-training
guide (docs/pretraining.md, XLCO) lists the same lines; ``benchmarks/demo_probe.py --contrast
NAME`` trains each on the demo's corpus.

- ``moco``: the paper's XLCO (MoCo): the ``<s>`` state, raw dot products at τ = 0.25, a queue
  of momentum keys as the only negatives. The ``base``, ``large`` and ``scratch-base``
  presets are this recipe (read off ``base``).
- ``demo``: what the demo trains (the ``demo`` preset, read off it): the mean of the universal
  layer's token states, normalised at τ = 0.05, the step's other keys as negatives beside the
  queue, keys without dropout.
- ``translation-ranking``: LaBSE's objective (Feng et al., 2022): keys from the query encoder
  itself, the step's other translations as the only negatives, both directions averaged,
  an additive margin of 0.3 on normalised vectors.

    >>> recipe_overrides("translation-ranking")[:2]
    ['contrast.use_momentum=false', 'contrast.in_batch_negatives=true']
"""

from __future__ import annotations

from typing import Any

from .config import ConfigError
from .presets import preset

# What makes a contrast's formulation (the layer, the queue's size and the momentum are the
# preset's scale, left as they are).
FORMULATION = ("use_momentum", "in_batch_negatives", "symmetric", "margin", "pooling", "normalize", "temperature", "key_dropout")


def _presets_formulation(name: str) -> dict[str, Any]:
    contrast = preset(name).contrast
    return {field: getattr(contrast, field) for field in FORMULATION}


CONTRAST_RECIPES: dict[str, dict[str, Any]] = {
    "moco": _presets_formulation("base"),
    "demo": _presets_formulation("demo"),
    "translation-ranking": {
        "use_momentum": False,
        "in_batch_negatives": True,
        "queue_size": 0,
        "symmetric": True,
        "margin": 0.3,
        "normalize": True,
        "temperature": 0.05,
    },
}


def recipe_overrides(name: str) -> list[str]:
    """``contrast.field=value`` lines of a recipe, in the form ``--set`` takes."""
    if name not in CONTRAST_RECIPES:
        raise ConfigError(f"contrast recipe {name!r}: expected one of {', '.join(CONTRAST_RECIPES)}")
    shown = lambda v: str(v).lower() if isinstance(v, bool) else str(v)  # noqa: E731  (as one types it)
    return [f"contrast.{field}={shown(value)}" for field, value in CONTRAST_RECIPES[name].items()]
