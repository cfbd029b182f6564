"""The docs are code: every fenced ``bash`` and ``python`` block of README.md and docs/*.md.

Two checks:

1. Every ``infoxlm …`` command line in every block (runnable or not) is parsed with the real
   argument parser (``infoxlm.cli.build_parser``, which imports no torch), so a renamed or
   removed flag fails here at once, in the quick subset.
2. Every block runs at toy scale, unless the HTML comment right before its fence says why it
   cannot run here: ``<!-- docs-test: skip (REASON) -->`` (a GPU, a cluster, a download, data
   of one's own, minutes of CPU). ``<!-- docs-test: slow -->`` marks a Python block slow; bash
   blocks start real ``infoxlm`` processes and are always slow.

How a block runs at toy scale (the one substitution mechanism): in a fresh copy of a workspace
whose names the docs use are made by fixtures (``store``, ``my-tokenizer``, ``tok``,
``my-model``, ``xlmr-base``, ``runs/base``, ``en.txt``, ``de.txt``, ``fr.txt``, ``sw.txt``,
``mono.ru.jsonl``, ``sentences.txt``, ``tatoeba/``, ``bucc2018/``, ``flores200_dataset/``: a
tiny tokenizer, store, model and run, see :func:`workspace`), less the paths the block itself
writes (each ``--output``, export's OUT), with the sizes in :data:`TOY_SCALE` replaced
(``--preset base`` → ``--preset test``, ``--vocab-size 32000`` → ``--vocab-size 150``, …).
Bash blocks run with ``bash -e`` and ``infoxlm`` on the PATH; Python
blocks are executed in that directory.

A plugin (pytest-codeblocks, sybil, pytest-markdown-docs) would collect the blocks, but none
substitutes sizes in a shell block or checks a command line against argparse without running
it, and those are the two things this test needs; splitting a file on fences takes a dozen lines.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from infoxlm.cli import build_parser

from conftest import TINY_TEXT
from mining_files import write_bucc_set, write_flores

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("bash", "console", "python")

# Toy-scale substitutions, applied to every block before it runs (never to the flag check).
TOY_SCALE = [
    (r"--preset (base|large|scratch-base|demo)\b(?! --print-config)", "--preset test"),
    (r"--vocab-size \d+", "--vocab-size 150"),
    (r"vocab_size=\d+", "vocab_size=150"),
    (r"--max-steps \d{2,}", "--max-steps 2"),
    (r"--step \d{3,}", "--step 2"),
    (r"--langs (?![a-z]{3}_[A-Z][a-z]{3}\b)\w+", "--langs deu"),  # Tatoeba's codes; Flores' (deu_Latn) stay
    (r"--layer \d+", "--layer 1"),  # the toy models have 2 layers
]
# Values for the shell variables that command lines use, so they parse.
SHELL_VARIABLES = {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "16", "xz": "cc100/de.txt.xz", "lang": "de", "x": "de", "n": "64"}
_MARKER = re.compile(r"<!--\s*docs-test:\s*(skip|slow)\s*(?:\((.*?)\))?\s*-->")


@dataclass(frozen=True)
class Block:
    file: str
    line: int  # of the opening fence, counted from 1
    language: str
    code: str
    marker: str | None  # "skip", "slow" or None
    reason: str

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line}"


def blocks_of(text: str, file: str) -> list[Block]:
    """The fenced blocks of a markdown text, each with the docs-test marker right before it."""
    found, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        fence = re.match(r"^(```+)(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1)))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.search(before)
        found.append(Block(file, i + 1, fence.group(2), "\n".join(lines[i + 1 : end]),
                           marker and marker.group(1), (marker and marker.group(2)) or ""))
        i = end + 1
    return found


def command_lines(code: str) -> list[list[str]]:
    """The argument lists of each ``infoxlm`` command in a shell block: continuation lines
    joined, comments, redirections and pipes dropped, ``torchrun … -m infoxlm`` unwrapped."""
    commands = []
    for line in code.replace("\\\n", " ").split("\n"):
        for part in re.split(r"&&|;|\|", line.split(" #")[0]):
            try:
                words = shlex.split(os.path.expandvars(part.replace("$(", "(")), comments=True)
            except ValueError:
                continue
            words = words[: next((k for k, w in enumerate(words) if re.match(r"^\d?[<>]", w)), len(words))]
            if "-m" in words and words[words.index("-m") + 1 : words.index("-m") + 2] == ["infoxlm"]:
                words = words[words.index("-m") + 1 :]
            if words[:1] == ["infoxlm"] and len(words) > 1:
                commands.append(words[1:])
    return commands


def strict_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The real parser with abbreviations refused, so ``--max-step`` in a doc does not pass
    as ``--max-steps`` (a flag renamed to a longer name would go unnoticed)."""
    parser = parser or build_parser()
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                strict_parser(sub)
    return parser


def parse_error(argv: list[str]) -> str | None:
    """None when the real parser accepts argv (``--help`` included), else why not."""
    try:
        strict_parser().parse_args(argv)
    except SystemExit as exit:
        return None if exit.code == 0 else f"exit {exit.code}"
    return None


ALL_BLOCKS = [b for path in DOC_FILES for b in blocks_of(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]
SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.language in ("bash", "console")]


def test_the_docs_have_a_short_front_page_and_eight_guides():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").split("\n")) <= 251
    assert len(DOC_FILES) - 1 >= 8


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.name)
def test_every_command_line_parses(block, monkeypatch, capsys):
    for name, value in SHELL_VARIABLES.items():
        monkeypatch.setenv(name, value)
    for argv in command_lines(block.code):
        assert parse_error(argv) is None, f"{block.name}: infoxlm {shlex.join(argv)}\n{capsys.readouterr().err}"


def test_a_renamed_flag_fails_the_check(monkeypatch):
    text = "Run it:\n\n<!-- docs-test: skip (needs GPUs) -->\n```bash\ninfoxlm pretrain --preset test \\\n    --data store --output runs/x --max-step 5\n```\n"
    (block,) = blocks_of(text, "synthetic.md")
    assert (block.marker, block.reason, block.line) == ("skip", "needs GPUs", 4)
    (argv,) = command_lines(block.code)
    assert parse_error(argv) == "exit 2"  # --max-step is not --max-steps
    assert parse_error(argv[:-2] + ["--max-steps", "5"]) is None


def test_every_block_runs_or_says_why_not(capsys):
    unmarked_skips = [b.name for b in ALL_BLOCKS if b.marker == "skip" and not b.reason]
    assert not unmarked_skips, f"skipped without a reason: {unmarked_skips}"
    runnable = [b for b in ALL_BLOCKS if b.language in RUNNABLE]
    ran = [b for b in runnable if b.marker != "skip"]
    with capsys.disabled():  # the count is shown on every run, captured or not
        print(f"\ndocs: {len(ran)} of {len(runnable)} bash/python blocks run; {len(runnable) - len(ran)} say why not; "
              f"{sum(len(command_lines(b.code)) for b in SHELL_BLOCKS)} infoxlm command lines parsed")
    assert len(ran) >= 10


def test_pretrain_help_says_init_takes_a_local_directory(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pretrain", "--help"])
    help_text = capsys.readouterr().out
    assert "--init takes a local directory; infoxlm downloads nothing" in help_text
    for line in help_text.split("\n"):
        if line.strip().startswith(("infoxlm ", "torchrun ")):
            assert "--init xlm-roberta-base" not in line
            assert parse_error(command_lines(line)[0]) is None, line


# ---------------------------------------------------------------- running the blocks


def _tatoeba(root: Path) -> None:
    root.mkdir()
    for code, lang in (("deu", "de"), ("rus", "ru"), ("cmn", "zh")):
        (root / f"tatoeba.{code}-eng.{code}").write_text("\n".join(TINY_TEXT[lang]) + "\n", encoding="utf-8")
        (root / f"tatoeba.{code}-eng.eng").write_text("\n".join(TINY_TEXT["en"]) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def workspace(tiny_model_dir, tiny_run, tmp_path_factory) -> Path:
    """The names the docs use, made at toy scale: tiny text, a tokenizer learned from it, a store
    of en, de and en-de on that tokenizer, a tiny model with it, a two-step run, Tatoeba, BUCC
    and Flores-200 files."""
    root = tmp_path_factory.mktemp("docs-workspace")
    for lang in ("en", "de"):
        (root / f"{lang}.txt").write_text("\n".join(TINY_TEXT[lang] * 5) + "\n", encoding="utf-8")
    for lang, like in (("fr", "en"), ("sw", "en")):  # the docs' other example names, tiny text too
        (root / f"{lang}.txt").write_text("\n".join(TINY_TEXT[like] * 5) + "\n", encoding="utf-8")
    (root / "mono.ru.jsonl").write_text("".join(json.dumps({"text": line}) + "\n" for line in TINY_TEXT["ru"] * 5), encoding="utf-8")
    (root / "sentences.txt").write_text("\n".join(TINY_TEXT["de"]) + "\n", encoding="utf-8")
    for name in ("my-tokenizer", "tok"):
        shutil.copytree(tiny_model_dir.parent / "tokenizer", root / name)
    for name in ("my-model", "xlmr-base"):
        shutil.copytree(tiny_model_dir, root / name)
    shutil.copytree(tiny_run.parent / "store", root / "store")
    shutil.copytree(tiny_run, root / "runs" / "base")
    _tatoeba(root / "tatoeba")
    write_bucc_set(root / "bucc2018", languages=("de", "fr"), n=40, hidden=10)
    write_flores(root / "flores200_dataset", n=30)
    return root


def toy_scale(code: str) -> str:
    for pattern, replacement in TOY_SCALE:
        code = re.sub(pattern, replacement, code)
    return code


def written_paths(code: str) -> list[str]:
    """What a block's commands write: each ``--output`` and the OUT of ``export SRC OUT``."""
    paths = []
    for argv in command_lines(code):
        paths += [argv[k + 1] for k, word in enumerate(argv[:-1]) if word == "--output"]
        positional = [w for w in argv[1:] if not w.startswith("-")]
        if argv[0] == "export" and len(positional) >= 2:
            paths.append(positional[1])
    return paths


RUN_BLOCKS = [
    pytest.param(b, id=b.name, marks=[pytest.mark.slow] if b.language != "python" or b.marker == "slow" else [])
    for b in ALL_BLOCKS if b.language in RUNNABLE and b.marker != "skip"
]


@pytest.mark.parametrize("block", RUN_BLOCKS)
def test_block_runs(block, workspace, tmp_path, monkeypatch):
    cwd = tmp_path / "work"
    shutil.copytree(workspace, cwd)
    code = toy_scale(block.code)
    for path in written_paths(code):  # what the block makes, it makes from nothing
        shutil.rmtree(cwd / path, ignore_errors=True)
    if block.language == "python":
        monkeypatch.chdir(cwd)
        # An objective a block registers (docs/architecture.md) stays with the block, not the process.
        from infoxlm.objectives import registry

        monkeypatch.setattr(registry, "BUILDERS", dict(registry.BUILDERS))
        exec(compile(code, block.name, "exec"), {"__name__": "__docs__"})
        return
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-e", "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{block.name} (at toy scale):\n{code}\n--- stderr:\n{result.stderr[-3000:]}"
