"""The pre-training engine: configuration, the joint step, checkpoints, distribution.

Its public face, what ``infoxlm pretrain`` itself calls::

    preset(name)                     a fresh TrainConfig for a named training recipe (base, demo, test …)
    TrainConfig                      the typed config: model, data, objectives, contrast, optim, run
    changed(config, optim={...})     sections replaced from typed values, validated
    pretrain(config, store, output)  train or resume a run; returns its directory once the last step is done
    RunStopped                       what pretrain raises for a run stopped before its end (checkpoint kept)

>>> from infoxlm.train import changed, preset
>>> changed(preset("test"), optim={"max_steps": 3}).optim.max_steps
3

These names are imported at first use (PEP 562's module ``__getattr__``), as the package's own
are: a submodule's import (``infoxlm.train.errors``, which the commands' parsers may name) runs
this file first, and it loads no torch.
"""

from __future__ import annotations

from ..lazy_exports import lazy_exports

# Public name → the module that defines it (imported when the name is first read).
_LAZY = {
    "RunStopped": ".stopping",
    "TrainConfig": ".config",
    "changed": ".config",
    "preset": ".presets",
    "pretrain": ".loop",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
