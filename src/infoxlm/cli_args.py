"""Argument types and choices shared by the commands, checked by argparse before any work starts.

    >>> positive_int("32")
    32
    >>> positive_int("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: '0' is not a positive integer
"""

from __future__ import annotations

import argparse

# The names the parsers offer as choices, written out here because the registries that define
# them (train/config.py's presets, bench/sizes.py's sizes, data/pipeline.py's objectives)
# import torch, which costs seconds that `--help` and a mistyped argument must not cost; the
# handlers use the registries themselves (tests/test_cli.py checks these lists against them).
PRESET_NAMES = ("base", "demo", "large", "scratch-base", "test", "xl", "xxl")
OBJECTIVE_NAMES = ("mmlm", "tlm", "xlco")
BENCH_SIZE_NAMES = ("test", "demo", "base", "large")


def positive_int(text: str) -> int:
    """An integer ≥ 1 (batch sizes, lengths, counts of steps or seeds)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def non_negative_int(text: str) -> int:
    """An integer ≥ 0 (step numbers)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 0")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (epochs, learning rates)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (``infoxlm embed: error: …``) instead
    of the usage block followed by the error; ``--help`` still shows the usage. Subcommand
    parsers are made of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
