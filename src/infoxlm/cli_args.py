"""Argument types and choices shared by the commands, checked by argparse before any work starts.

    >>> positive_int("32")
    32
    >>> positive_int("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: '0' is not a positive integer
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable
from pathlib import Path

# The names the parsers offer as choices, written out here because the registries that define
# them (train/presets.py's presets, bench/sizes.py's sizes, data/pipeline.py's objectives)
# import torch, which costs seconds that `--help` and a mistyped argument must not cost; the
# handlers use the registries themselves (tests/test_cli.py checks these lists against them).
PRESET_NAMES = (
    "base", "demo", "demo-checkpoint", "demo-multiway", "demo-quick", "large", "paper-demo", "paper-demo-quick",
    "scratch-base", "test", "xl", "xxl",
)  # fmt: skip
# What each preset is for and where it runs, smallest first: pretrain's error when --preset is
# missing lists them (a default preset would run base's 150,000 steps on a laptop).
PRESET_PURPOSES = {
    "test": "seconds on a CPU; a tiny model to try the commands",
    "demo-quick": "seconds on a CPU; what infoxlm demo --quick trains, demo-multiway on a tiny model",
    "paper-demo-quick": "seconds on a CPU; what infoxlm demo --setting paper --quick trains, paper-demo for 3 steps",
    "demo": "minutes on a CPU; the demo's 4 × 256 model with English-centred pairs",
    "demo-multiway": "minutes on a CPU; demo with half of its pairs xx–yy through their shared English sentence, what infoxlm demo trains",
    "paper-demo": "minutes on a CPU; what infoxlm demo --setting paper trains: the shipped 4 × 256 masked LM "
    "continued with the paper's recipe, scaled",
    "demo-checkpoint": "17 minutes on a CPU; the shipped masked LM's recipe, MMLM only, as scripts/build_demo_checkpoint.py trains it",
    "scratch-base": "the paper's from-scratch recipe, 12 × 768; GPUs",
    "base": "continues XLM-R base, needs --init; the paper's main setting; GPUs",
    "large": "continues XLM-R large, needs --init; GPUs",
    "xl": "continues a 36 × 2560 model, needs --init; FSDP on GPUs",
    "xxl": "continues a 48 × 4096 model, needs --init; FSDP on GPUs",
}
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


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` and ``--step``: the one model argument of every command that reads a model
    (``train/model_source.py`` resolves it)."""
    parser.add_argument("--model", required=True, type=Path,
                        help="Hugging Face XLM-R directory, sentence-transformers export or run directory of `infoxlm pretrain`")
    parser.add_argument("--step", type=positive_int, default=None,
                        help="run directory: checkpoint step (default: the latest)")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (``infoxlm embed: error: …``) instead
    of the usage block followed by the error, with the nearest valid option or choice
    suggested for a mistyped one; ``--help`` still shows the usage. Subcommand parsers are
    made of the same class.

    An unrecognized argument is reported by the parser that owns it: argparse lets the
    subcommand's parser pass what it does not know up to the top-level one, which knows none
    of the subcommand's options, so the innermost parser to see it marks the namespace.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._missing_texts: dict[str, str] = {}  # option → what to say when it is missing

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, _UNRECOGNIZED_BY):
            setattr(namespace, _UNRECOGNIZED_BY, self)  # the innermost parser sees them first
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        owner = vars(namespace).pop(_UNRECOGNIZED_BY, self)
        if extras:
            owner.error(unrecognized_message(extras, owner._option_string_actions))
        return namespace

    def explain_missing(self, option: str, text: str) -> None:
        """Say ``text`` after argparse's "the following arguments are required" when ``option``
        is among them (what the choices are, rather than only that one is needed)."""
        self._missing_texts[option] = text

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{self._missing_hint(message)}{_choice_hint(message)} "
                  f"(see {self.prog} --help)\n")

    def _missing_hint(self, message: str) -> str:
        if not message.startswith("the following arguments are required: "):
            return ""
        named = message.split(": ", 1)[1].split(", ")
        return "".join(f"; {text}" for option, text in self._missing_texts.items() if option in named)


_UNRECOGNIZED_BY = "_infoxlm_unrecognized_by"  # namespace attribute: the parser to report extras


def preset_list() -> str:
    """Every preset with what it is for and where it runs, in one line.

    >>> preset_list()[:63]
    'test (seconds on a CPU; a tiny model to try the commands), demo'
    """
    return ", ".join(f"{name} ({purpose})" for name, purpose in PRESET_PURPOSES.items())


def unrecognized_message(extras: list[str], options: Iterable[str]) -> str:
    """argparse's message for ``extras``, with the nearest option for each mistyped flag.

    >>> unrecognized_message(["--steps", "10"], ["--help", "--max-steps", "--set", "--stop-at"])
    'unrecognized arguments: --steps 10; did you mean --max-steps?'
    """
    message = f"unrecognized arguments: {' '.join(extras)}"
    guesses = [nearest_option(word, options) for word in extras if word.startswith("--")]
    guesses = list(dict.fromkeys(g for g in guesses if g))
    return message + (f"; did you mean {' or '.join(guesses)}?" if guesses else "")


def nearest_option(word: str, options: Iterable[str]) -> str | None:
    """The long option ``word`` (``--name`` or ``--name=value``) was most likely meant to be:
    one whose name contains it or is contained in it (``--steps`` → ``--max-steps``,
    ``--layers`` → ``--layer``), else the closest spelling (``--ouput`` → ``--output``).

    >>> nearest_option("--ouput=x", ["--output", "--init"]), nearest_option("--lr", ["--help"])
    ('--output', None)
    """
    name = word.split("=", 1)[0].lstrip("-").lower()
    names = {option[2:]: option for option in options if option.startswith("--")}
    if len(name) >= 3:
        related = [n for n in names if name in n or n in name]
        if related:
            return names[max(related, key=lambda n: difflib.SequenceMatcher(None, name, n).ratio())]
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return names[close[0]] if close else None


def _choice_hint(message: str) -> str:
    """'; did you mean 'pretrain'?' after argparse's "invalid choice: 'pretrian' (choose from
    'pretrain', …)" when one choice is close; else nothing."""
    found = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
    if found is None:
        return ""
    choices = re.findall(r"'([^']*)'", found.group(2))
    close = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
