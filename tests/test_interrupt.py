"""Tests for infoxlm.interrupt: a torchrun worker asks Linux for SIGTERM when torchrun dies.

The end-to-end case (torchrun SIGKILLed, its workers stop with a checkpoint) is in
tests/train/test_slurm_signals.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

# In a fresh process (the setting outlives the call): what prctl(PR_GET_PDEATHSIG) reads after it.
PROBE = """
import ctypes, os, sys
from infoxlm import interrupt
asked = interrupt.end_with_launcher(dict(os.environ))
libc = ctypes.CDLL(None, use_errno=True)
signal = ctypes.c_int(0)
libc.prctl(2, ctypes.byref(signal), 0, 0, 0)  # PR_GET_PDEATHSIG
print(asked, signal.value)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_only_a_worker_torchrun_started_asks_for_sigterm_when_its_parent_dies():
    def probe(env: dict[str, str]) -> list[str]:
        return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True).stdout.split()

    plain = {k: v for k, v in os.environ.items() if k != "TORCHELASTIC_RUN_ID"}
    assert probe(plain) == ["False", "0"]
    assert probe({**plain, "TORCHELASTIC_RUN_ID": "job-1"}) == ["True", str(int(signal.SIGTERM))]
