"""A Ctrl-C that is never lost while the ``infoxlm`` command runs.

Python turns SIGINT into a KeyboardInterrupt wherever the main thread happens to be. Raised
inside a finalizer, a callback or an import that catches broadly, it is printed or swallowed
and the command goes on (a Ctrl-C during start-up was seen to be lost this way). The handler
here raises it just the same and also remembers it; long-running commands call ``check()``
at safe points (``infoxlm pretrain``: before it starts and at every step boundary), which
raises it again.

It is installed when the package is imported as the ``infoxlm`` command (``python -m
infoxlm`` or the ``infoxlm`` script, before the heavy imports), never when infoxlm is
imported as a library; ``latched()`` installs it for one block (``pretrain`` called from
Python) and ``deferred()`` holds a Ctrl-C until a block is done (a checkpoint being written).

A worker that torchrun started does not outlive torchrun (it would train on as an orphan to
the last step): when torchrun dies, however it dies (SIGKILL, a signal it does not handle
such as SIGUSR1), Linux sends the worker SIGTERM, which ``infoxlm pretrain`` takes as a
request to stop after the step in progress with a checkpoint (``train/stopping.py``); before
that handler is in place SIGTERM ends the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from pathlib import Path

requested = False  # a Ctrl-C arrived since install() (or since latched() began)
_installed = False
_deferring = False  # inside deferred(): remember a Ctrl-C, raise it at the block's end

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _handle(signum, frame) -> None:
    global requested
    requested = True
    if not _deferring:
        raise KeyboardInterrupt


def install() -> None:
    """Take over SIGINT in the main thread (where signal handlers run) where Python's own
    handler is in place (not where SIGINT is ignored, as in a background job); idempotent.
    In a worker torchrun started, also :func:`end_with_launcher`."""
    global _installed
    end_with_launcher()
    if (
        not _installed
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):
        signal.signal(signal.SIGINT, _handle)
        _installed = True


def raises_on_sigint(handler) -> bool:
    """Whether ``handler`` (a SIGINT handler) ends what runs with a KeyboardInterrupt: Python's
    own or this module's; not SIG_IGN (a background job), SIG_DFL or someone else's."""
    return handler is signal.default_int_handler or handler is _handle


def check() -> None:
    """Raise KeyboardInterrupt if a Ctrl-C arrived, whether or not someone swallowed it."""
    if requested:
        raise KeyboardInterrupt


@contextlib.contextmanager
def latched():
    """The handler for the block, where the command has not installed it already (infoxlm
    used as a library): only over Python's own handler and in the main thread, as
    ``install``; the previous handler, and a clean slate, restored on the way out. Inside
    the command (handler in place) it changes nothing, so that a Ctrl-C seen during start-up
    still counts."""
    global requested
    previous = None
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        requested = False
        previous = signal.signal(signal.SIGINT, _handle)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            requested = False


@contextlib.contextmanager
def deferred():
    """Hold a Ctrl-C until the block is done, then raise it (a checkpoint being written:
    interrupted inside torch.save's zip writer, the writer's own error would replace the
    KeyboardInterrupt). Only while the handler here is installed; Python's own raises at once."""
    global _deferring
    _deferring = True
    try:
        yield
    finally:
        _deferring = False
    check()


def started_as_command(argv: list[str] | None = None) -> bool:
    """Whether this process is ``python -m infoxlm …`` or the ``infoxlm`` script."""
    argv = list(getattr(sys, "orig_argv", sys.argv) if argv is None else argv)
    as_module = any(a == "-m" and b == "infoxlm" for a, b in zip(argv, argv[1:]))
    as_script = len(argv) > 1 and Path(argv[1]).name == "infoxlm"
    return as_module or as_script


def end_with_launcher(environ=os.environ) -> bool:
    """In a process torchrun started (it sets TORCHELASTIC_RUN_ID), ask Linux to send SIGTERM
    when its parent, torchrun, dies (prctl PR_SET_PDEATHSIG); whether it was asked.

    Linux sends it when the thread that started the process ends; torchrun starts its workers
    from its main thread. A torchrun that dies before this call (a few milliseconds after the
    worker's start) goes unnoticed.
    """
    if "TORCHELASTIC_RUN_ID" not in environ or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
