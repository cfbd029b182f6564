"""PAWS-X's official .tsv layout and the errors on files that are not in it."""

from __future__ import annotations

import pytest

from infoxlm.eval.pawsx_data import PAWSXDataError, read_pawsx_split, read_pawsx_tsv

PAWSX_HEADER = "id\tsentence1\tsentence2\tlabel"


def write_pawsx(root, languages=("en",), n_train=4, n_eval=2):
    """x-final's layout: {lang}/dev_2k.tsv, test_2k.tsv, en/train.tsv, the others' translated_train.tsv."""
    pairs = [("A cat sleeps.", "A cat sleeps.", 1), ("A cat sleeps.", "We walk.", 0)]
    for lang in languages:
        (root / lang).mkdir(parents=True)
        for name, n in (("dev_2k", n_eval), ("test_2k", n_eval), ("train" if lang == "en" else "translated_train", n_train)):
            rows = [PAWSX_HEADER] + [f"{i}\t{a}\t{b}\t{label}" for i, (a, b, label) in enumerate((pairs * n)[:n])]
            (root / lang / f"{name}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def test_reads_pairs_and_labels_of_every_split(tmp_path):
    root = write_pawsx(tmp_path / "x-final", languages=("en", "de"), n_train=5, n_eval=3)
    train = read_pawsx_split(root, "train", ["en", "de"])  # en: train.tsv, de: translated_train.tsv
    assert {lang: len(pairs) for lang, pairs in train.items()} == {"en": 5, "de": 5}
    pair = train["en"][0]
    assert pair.label in (0, 1) and pair.label == int(pair.premise == pair.hypothesis)


def test_a_quote_is_plain_text(tmp_path):
    path = tmp_path / "dev_2k.tsv"
    path.write_text(f'{PAWSX_HEADER}\n1\t"He said\tit\t1\n', encoding="utf-8")
    assert read_pawsx_tsv(path)[0].premise == '"He said'


@pytest.mark.parametrize("body, message", [
    ("1\ta\tb\t2\n", r"dev_2k.tsv:2: label '2': expected 0 or 1"),
    ("1\ta\tb\t1\n2\ta\tb\n", r"dev_2k.tsv:3: 3 tab-separated fields, expected 4"),
    ("", r"dev_2k.tsv: no sentence pairs after the header"),
])
def test_bad_lines_name_the_file_and_line(tmp_path, body, message):
    path = tmp_path / "dev_2k.tsv"
    path.write_text(PAWSX_HEADER + "\n" + body, encoding="utf-8")
    with pytest.raises(PAWSXDataError, match=message):
        read_pawsx_tsv(path)


def test_a_wrong_header_or_missing_file_or_language_is_refused(tmp_path):
    path = tmp_path / "dev_2k.tsv"
    path.write_text("sentence1\tsentence2\tlabel\na\tb\t1\n", encoding="utf-8")
    with pytest.raises(PAWSXDataError, match="dev_2k.tsv:1: header .* expected the tab-separated header id sentence1"):
        read_pawsx_tsv(path)
    root = write_pawsx(tmp_path / "x", languages=("en",))
    with pytest.raises(PAWSXDataError, match=r"de/test_2k.tsv: missing PAWS-X test file for de"):
        read_pawsx_split(root, "test", ["en", "de"])
    with pytest.raises(PAWSXDataError, match="PAWS-X language 'ru'"):
        read_pawsx_split(root, "test", ["ru"])
