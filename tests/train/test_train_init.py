"""``infoxlm.train``'s public face (its ``__init__``): the names ``infoxlm pretrain`` calls,
imported at first use, so that importing the package itself loads no torch."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_the_public_names_are_the_defining_objects():
    import infoxlm.train
    from infoxlm.train.config import TrainConfig, changed
    from infoxlm.train.loop import pretrain
    from infoxlm.train.presets import preset
    from infoxlm.train.stopping import RunStopped

    found = tuple(getattr(infoxlm.train, name) for name in ("pretrain", "preset", "TrainConfig", "changed", "RunStopped"))
    assert found == (pretrain, preset, TrainConfig, changed, RunStopped)
    assert set(infoxlm.train.__all__) <= set(dir(infoxlm.train))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        infoxlm.train.Nope


def test_import_infoxlm_train_loads_no_torch_until_a_public_name_is_read():
    probe = (
        "import sys, infoxlm.train\n"
        "print('torch' in sys.modules)\n"
        "from infoxlm.train import TrainConfig, preset, pretrain\n"
        "print(isinstance(preset('test'), TrainConfig), pretrain.__module__, 'torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["False", "True infoxlm.train.loop True"]
