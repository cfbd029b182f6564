"""XNLI loaders on tiny files in the official formats (XNLI-1.0, XNLI-MT-1.0, Hugging Face)."""

from __future__ import annotations

import sys
import types

import pytest

from infoxlm.eval.xnli_data import (
    NLIExample,
    check_languages,
    XNLIDataError,
    load_xnli_hf,
    load_xnli_split,
    read_xnli_mt_train,
    read_xnli_translate_train_all,
    read_xnli_tsv,
    xnli_mt_train_path,
)

# The 19 columns of XNLI-1.0's xnli.{dev,test}.tsv: sentence1 at index 6, sentence2 at 7.
XNLI_HEADER = [
    "language", "gold_label", "sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse",
    "sentence2_parse", "sentence1", "sentence2", "promptID", "pairID", "genre", "label1", "label2",
    "label3", "label4", "label5", "sentence1_tokenized", "sentence2_tokenized", "match",
]


def xnli_row(lang, label, premise, hypothesis):
    row = [lang, label, "", "", "", "", premise, hypothesis, "1", "2", "fiction"] + [label] * 5
    return row + [premise, hypothesis, "True"]


def write_tsv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_xnli_tsv_per_language_with_quotes_kept(tmp_path):
    path = write_tsv(tmp_path / "XNLI-1.0" / "xnli.dev.tsv", [
        XNLI_HEADER,
        xnli_row("en", "entailment", 'He said "yes', 'He answered.'),  # an unbalanced quote
        xnli_row("de", "contradiction", '"Nein", sagte er.', "Er stimmte zu."),
        xnli_row("en", "neutral", "A", '""'),
    ])
    data = read_xnli_tsv(path)
    assert data["en"] == [NLIExample('He said "yes', "He answered.", 0), NLIExample("A", '""', 1)]
    assert data["de"] == [("\"Nein\", sagte er.", "Er stimmte zu.", 2)]
    assert list(load_xnli_split(tmp_path / "XNLI-1.0", "dev", ["de"])) == ["de"]


def test_xnli_tsv_errors_name_file_and_line(tmp_path):
    short = write_tsv(tmp_path / "short.tsv", [XNLI_HEADER, xnli_row("en", "neutral", "a", "b"), ["en", "neutral", "a"]])
    with pytest.raises(XNLIDataError, match=r"short\.tsv:3: 3 tab-separated fields, expected 19"):
        read_xnli_tsv(short)
    with pytest.warns(UserWarning, match="skipped 1 lines"):
        assert len(read_xnli_tsv(short, strict=False)["en"]) == 1
    label = write_tsv(tmp_path / "label.tsv", [XNLI_HEADER, xnli_row("en", "maybe", "a", "b")])
    with pytest.raises(XNLIDataError, match=r"label\.tsv:2: label 'maybe'"):
        read_xnli_tsv(label)
    lang = write_tsv(tmp_path / "lang.tsv", [XNLI_HEADER, xnli_row("xx", "neutral", "a", "b")])
    with pytest.raises(XNLIDataError, match=r"lang\.tsv:2: language 'xx'"):
        read_xnli_tsv(lang)
    headless = write_tsv(tmp_path / "headless.tsv", [xnli_row("en", "neutral", "a", "b")])
    with pytest.raises(XNLIDataError, match=r"headless\.tsv:1: header .* lacks language"):
        read_xnli_tsv(headless)
    with pytest.raises(XNLIDataError, match=r"missing\.tsv: no such file; expected an XNLI \.tsv file$"):
        read_xnli_tsv(tmp_path / "missing.tsv")
    with pytest.raises(XNLIDataError, match=f"{tmp_path}: is a directory; expected an XNLI \\.tsv file$"):
        read_xnli_tsv(tmp_path)
    (tmp_path / "latin1.tsv").write_bytes(b"language\tgold_label\tsentence1\tsentence2\nen\tneutral\tcaf\xe9\tb\n")
    with pytest.raises(XNLIDataError, match=r"latin1\.tsv: not UTF-8 \(byte 54\); expected an XNLI \.tsv file$"):
        read_xnli_tsv(tmp_path / "latin1.tsv")
    with pytest.raises(XNLIDataError, match="no fr examples; it has en: name those with --languages en$"):
        read_xnli_tsv(write_tsv(tmp_path / "ok.tsv", [XNLI_HEADER, xnli_row("en", "neutral", "a", "b")]), ["fr"])
    two = write_tsv(tmp_path / "two.tsv", [XNLI_HEADER, xnli_row("en", "neutral", "a", "b"), xnli_row("de", "neutral", "a", "b")])
    with pytest.raises(XNLIDataError, match="no ar examples; it has de en: name those with --languages de en$"):
        read_xnli_tsv(two, check_languages(None))  # finetune's default: all 15
    with pytest.raises(XNLIDataError, match="XNLI language 'jp'"):
        read_xnli_tsv(tmp_path / "ok.tsv", ["jp"])


def test_mt_train_contradictory_header_and_crlf(tmp_path):
    root = tmp_path / "XNLI-MT-1.0"
    path = xnli_mt_train_path(root, "de")
    assert path == root / "multinli" / "multinli.train.de.tsv"
    path.parent.mkdir(parents=True)
    path.write_bytes(
        "premise\thypo\tlabel\r\n"
        'Er sagte: "Ja.\tEr stimmte zu.\tentailment\r\n'
        "Kein Hund.\tEin Hund.\tcontradictory\r\n"
        "Etwas.\tNichts.\tneutral \r\n".encode()
    )
    assert read_xnli_mt_train(path) == [
        ('Er sagte: "Ja.', "Er stimmte zu.", 0),
        ("Kein Hund.", "Ein Hund.", 2),
        ("Etwas.", "Nichts.", 1),
    ]
    assert list(read_xnli_translate_train_all(root, ["de"])) == ["de"]
    bad = write_tsv(tmp_path / "bad.tsv", [["premise", "hypo", "label"], ["only", "two"]])
    with pytest.raises(XNLIDataError, match=r"bad\.tsv:2: 2 tab-separated fields, expected 3"):
        read_xnli_mt_train(bad)


def test_hugging_face_xnli(monkeypatch):
    rows = {"de": [{"premise": "p", "hypothesis": "h", "label": 2}], "fr": [{"premise": "p", "hypothesis": "h", "label": -1}]}
    calls = []

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return rows[config]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    assert load_xnli_hf("dev", ["de"]) == {"de": [("p", "h", 2)]}
    assert calls == [("xnli", "de", "validation")]
    with pytest.raises(XNLIDataError, match="label -1"):
        load_xnli_hf("test", ["fr"])
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails
    with pytest.raises(XNLIDataError, match=r"needs the datasets package; pip install 'infoxlm\[hf-datasets\]'"):
        load_xnli_hf("test", ["de"])  # as prepare says it


def test_hugging_face_xnli_offline_and_not_cached_is_refused_as_prepare_refuses(offline_hub):
    """datasets itself says "BuilderConfig 'en' not found" then; prepare's loader says what is wrong."""
    with pytest.raises(XNLIDataError) as error:
        load_xnli_hf("train", ["en"])
    assert str(error.value) == (
        f"hf:xnli (config 'en', split 'train'): not in the local cache ({offline_hub}) and offline "
        "(HF_DATASETS_OFFLINE is set); expected a dataset downloaded before, with network access"
    )
