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


def test_a_ctrl_c_during_a_checkpoint_write_waits_for_the_write_then_interrupts(monkeypatch):
    from infoxlm import interrupt

    monkeypatch.setattr(interrupt, "requested", False)
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with interrupt.deferred():
            interrupt._handle(signal.SIGINT, None)  # what the handler does when Ctrl-C arrives here
            finished.append(True)  # the write goes on to its end
    assert finished == [True] and interrupt.requested
    with pytest.raises(KeyboardInterrupt):
        interrupt._handle(signal.SIGINT, None)  # outside a write: at once


def test_a_latched_block_installs_the_handler_and_leaves_a_clean_slate(monkeypatch):
    """pretrain called from Python: the handler for the run only, Python's own one back after
    it, and a Ctrl-C of that run not held against the next one."""
    from infoxlm import interrupt

    monkeypatch.setattr(interrupt, "requested", False)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupt.latched():
                assert signal.getsignal(signal.SIGINT) is interrupt._handle
                interrupt._handle(signal.SIGINT, None)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert not interrupt.requested
        interrupt.check()  # nothing held
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_latched_block_leaves_an_ignored_sigint_alone(monkeypatch):
    """A background job starts with SIGINT ignored: nothing is installed over that."""
    from infoxlm import interrupt

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupt.latched():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
