"""Tests for infoxlm.commands.prepare_show: `infoxlm prepare show` as a user calls it."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import TINY_TEXT

from infoxlm.cli import main as infoxlm_main
from infoxlm.data.examples import MonoBlocks
from infoxlm.corpus.prepare import prepare_monolingual
from infoxlm.data.store import TokenStore


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_model_dir):
    """Short monolingual lines, several 512-token blocks of them, in documents of 10 lines."""
    root = tmp_path_factory.mktemp("show-cli")
    lines = (TINY_TEXT["de"] * 60)[:180]
    text = "\n\n".join("\n".join(lines[k : k + 10]) for k in range(0, len(lines), 10))
    (root / "de.txt").write_text(text + "\n", encoding="utf-8")
    prepare_monolingual("de", [root / "de.txt"], tiny_model_dir, root / "store", show_progress=False)
    return root / "store"


def test_every_line_of_each_512_token_block_ends_with_eos(store, capsys):
    assert infoxlm_main(["prepare", "show", str(store), "--objective", "mmlm", "--step", "0", "--examples", "2"]) == 0
    out = capsys.readouterr().out
    corpus = TokenStore.open(store).mono["de"]
    blocks = MonoBlocks(corpus, block_size=512)
    assert blocks.num_blocks > 2
    line_ends = np.asarray(corpus.lines.offsets)
    doc_ends = line_ends[np.asarray(corpus.doc_offsets)[1:]]
    examples = out.strip().split("\n\n")
    assert len(examples) == 2
    for example in examples:
        header, counts, body = example.split("\n")
        k = int(re.search(r"de block (\d+)", header).group(1))
        begin, end = blocks.block_starts[k], blocks.block_starts[k + 1]
        lines_in_block = int(np.count_nonzero((line_ends > begin) & (line_ends <= end)))
        documents_closed = int(np.count_nonzero((doc_ends > begin) & (doc_ends <= end)))
        assert int(counts.split()[0]) == end - begin + 1 <= 512
        assert body.count("</s>") == lines_in_block + documents_closed
        assert body.startswith("<s>") and body.endswith("</s>")
        # Between two </s> there is one whole line of the corpus (or nothing: a document's end).
        for segment in body[len("<s>") :].split("</s>")[:-1]:
            assert "[" in segment or segment.strip() in TINY_TEXT["de"] + [""]


def test_the_run_config_decides_what_is_shown(store, capsys):
    argv = ["prepare", "show", str(store), "--objective", "mmlm", "--examples", "1"]
    assert infoxlm_main(argv + ["--preset", "demo"]) == 0
    demo = capsys.readouterr().out
    assert int(demo.split("\n")[1].split()[0]) <= 128  # the demo preset's blocks
    assert infoxlm_main(argv + ["--preset", "demo", "--set", "run.seed=7"]) == 0
    assert capsys.readouterr().out != demo  # the run's seed decides the data
    assert infoxlm_main(argv) == 0  # no preset: the base preset's, said so
    assert "the base preset's data settings (no --preset or --config given)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--objective", "nsp"], "argument --objective: invalid choice: 'nsp'"),
        (["--objective", "mmlm", "--step", "-1"], "'-1' is not an integer >= 0"),
        (["--objective", "tlm"], r"no parallel corpora .* tlm_batch_size=2048"),
        (["--objective", "mmlm", "--set", "data.block_size=2"], "block_size must be an integer >= 3"),
    ],
)
def test_bad_objective_step_or_config_is_one_line(store, capsys, argv, message):
    try:
        code = infoxlm_main(["prepare", "show", str(store), *argv])
    except SystemExit as usage_error:  # argparse's own checks
        code = usage_error.code
    assert code != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err


def test_a_missing_store_is_one_line(tmp_path, capsys):
    assert infoxlm_main(["prepare", "show", str(tmp_path / "none"), "--objective", "mmlm"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a token store" in err


def test_blocks_of_long_paragraphs_hold_at_least_half_a_block(tmp_path, tiny_model_dir, capsys):
    """Paragraphs of 600-2,000 tokens: prepare stores them as 512-token lines (513 with their
    </s>, one more than a 512-token block holds); before, a third of the blocks were stubs."""
    from infoxlm.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    rng = np.random.default_rng(3)
    words = " ".join(TINY_TEXT["de"]).split()
    paragraphs = []
    while len(paragraphs) < 30:
        line = " ".join(rng.choice(words, int(rng.integers(150, 700))))
        if 600 <= len(tokenizer.encode(line, add_special_tokens=False)) <= 2000:
            paragraphs.append(line)
    (tmp_path / "de.txt").write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
    prepare_monolingual("de", [tmp_path / "de.txt"], tiny_model_dir, tmp_path / "store", show_progress=False)
    blocks = MonoBlocks(TokenStore.open(tmp_path / "store").mono["de"], block_size=512)
    assert infoxlm_main(["prepare", "show", str(tmp_path / "store"), "--objective", "mmlm", "--examples", "50"]) == 0
    shown = re.findall(r"de block (\d+)\n(\d+) tokens", capsys.readouterr().out)
    assert len(shown) == 50
    for block, tokens in shown:
        assert 256 <= int(tokens) <= 512 or int(block) == blocks.num_blocks - 1, (block, tokens)
