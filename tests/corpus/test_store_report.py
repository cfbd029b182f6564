"""Tests for infoxlm.corpus.store_report's text: the tables ``infoxlm prepare inspect`` prints."""

from __future__ import annotations

from infoxlm.corpus.store_report import format_report

TOKENIZER = {"file": "tokenizer.json", "fingerprint": "ab" * 32, "vocab_size": 250_002}


def mono_entry(lines, tokens, p, blocks, short, unk, skipped):
    return {"lines": lines, "documents": lines // 2, "tokens": tokens, "probability": p, "blocks": blocks,
            "short_blocks": short, "unk_rate": unk, "skipped": skipped}  # fmt: skip


def test_both_pools_print_as_aligned_tables():
    report = {
        "store": "store", "tokenizer": TOKENIZER, "alpha": 0.7, "sampling_unit": "tokens", "block_size": 64,
        "mono": {
            "de": mono_entry(1200, 34_567, 0.61234, 40, 3, 0.0001, {"empty": 2, "invalid_utf8": 0}),
            "sw": mono_entry(8, 90, 0.38766, 0, 0, None, {}),
        },
        "parallel": {"en-de": {"pairs": 5000, "tokens": 123_456, "probability": 1.0,
                               "unk_rate": {"en": 0.0, "de": 0.02}, "skipped": {"duplicate": 7}}},
    }  # fmt: skip
    assert format_report(report).splitlines() == [
        "store store: tokenizer tokenizer.json (sha256 abababababab…, vocab 250,002)",
        "",
        "Monolingual corpora: sampling p_l ∝ (n_l/n)^0.7, n counted in tokens; MMLM blocks of 64 tokens, short: under 32",
        "  lang  lines  documents  tokens       p  blocks  short   <unk>  skipped",
        "  de    1,200        600  34,567  0.6123      40  7.5 %  0.01 %  empty 2",
        "  sw        8          4      90  0.3877       0      -     n/a  -",
        "",
        "Parallel corpora: sampling p_l ∝ (n_l/n)^0.7, n counted in tokens (both sides)",
        "  pair   pairs   tokens       p                 <unk>  skipped",
        "  en-de  5,000  123,456  1.0000  en 0.00 %, de 2.00 %  duplicate 7",
    ]


def test_an_empty_pool_says_none():
    report = {"store": "s", "tokenizer": TOKENIZER, "alpha": 0.5, "mono": {}, "parallel": {}}
    text = format_report(report)
    assert text.splitlines()[2:] == [
        "Monolingual corpora: sampling p_l ∝ (n_l/n)^0.5, n counted in lines; MMLM blocks of 512 tokens, short: under 256",
        "  none",
        "",
        "Parallel corpora: sampling p_l ∝ (n_l/n)^0.5, n counted in pairs",
        "  none",
    ]
