"""``import infoxlm``: cheap, and every public name still there."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_import_infoxlm_loads_no_torch_until_a_public_name_is_read():
    probe = (
        "import sys, infoxlm\n"
        "print('torch' in sys.modules)\n"
        "print(infoxlm.Encoder.__name__, infoxlm.embed.__name__, 'torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["False", "Encoder embed True"]


def test_every_public_name_resolves_to_its_defining_object():
    import infoxlm
    from infoxlm.embedding import embed
    from infoxlm.model import Encoder
    from infoxlm.tokenizer_training import train_tokenizer

    assert (infoxlm.Encoder, infoxlm.embed, infoxlm.train_tokenizer) == (Encoder, embed, train_tokenizer)
    assert all(getattr(infoxlm, name) is not None for name in infoxlm.__all__)
    assert set(infoxlm.__all__) <= set(dir(infoxlm))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        infoxlm.Nope
