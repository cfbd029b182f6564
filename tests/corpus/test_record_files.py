"""Tests for infoxlm.corpus.record_files and infoxlm.corpus.inputs: JSON Lines, Parquet, saved and
Hub datasets through ``infoxlm prepare``, which must give the store the same text gives."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from infoxlm.cli import main as infoxlm_main
from infoxlm.corpus.inputs import HubDataset, input_source
from infoxlm.corpus.prepare import prepare_monolingual, prepare_parallel
from infoxlm.corpus.record_files import record_line_blocks
from infoxlm.errors import DataError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

# Two documents, the second with an empty value inside it (a blank line: a third document).
LINES = [
    "Die Katze schläft auf dem warmen Sofa.",
    "Öffne die Datei und speichere sie.",
    "",
    "Wir gingen zur alten Brücke.",
    "Die Katze schläft.",
    "",
    "Öffne die Datei.",
]
EN = ["The cat sleeps on the warm sofa.", "Open the file and save it.", "", "We walked to the old bridge."]
DE = ["Die Katze schläft auf dem warmen Sofa.", "Öffne die Datei und speichere sie.", "Hallo", ""]


def write_jsonl(path: Path, records: list, opener=open) -> Path:
    with opener(path, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write((record if isinstance(record, str) else json.dumps(record, ensure_ascii=False)) + "\n")
    return path


def save_dataset(path: Path, columns: dict) -> Path:
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict(columns).save_to_disk(str(path))
    return path


def prepare(capsys, *args) -> tuple[int, str]:
    code = infoxlm_main([str(a) for a in args] + ["--no-progress"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def inspect(capsys, store: Path, kind: str, name: str) -> dict:
    assert infoxlm_main(["prepare", "inspect", str(store), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)[kind][name]
    return {key: report[key] for key in ("checksum", "lines", "tokens", "documents") if key in report}


def mono_inputs(root: Path) -> dict[str, Path]:
    """The same lines as a text file and in every record format, with other fields beside them."""
    (root / "de.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    records = [{"id": i, "text": line, "meta": {"source": "test"}} for i, line in enumerate(LINES)]
    table = pa.table({"id": list(range(len(LINES))), "text": LINES})
    pq.write_table(table, root / "de.parquet", row_group_size=3)
    (root / "parts").mkdir()
    pq.write_table(table.slice(0, 4), root / "parts" / "part-0.parquet")
    pq.write_table(table.slice(4), root / "parts" / "part-1.parquet")
    # A pandas categorical column is stored dictionary-encoded.
    categorical = pa.table({"text": pa.array(LINES).dictionary_encode()})
    pq.write_table(categorical, root / "categorical.parquet")
    return {
        "de.txt": root / "de.txt",
        "de.jsonl": write_jsonl(root / "de.jsonl", records),
        "de.jsonl.gz": write_jsonl(root / "de.jsonl.gz", records, gzip.open),
        "de.parquet": root / "de.parquet",
        "parts": root / "parts",
        "saved": save_dataset(root / "saved", {"text": LINES, "n": list(range(len(LINES)))}),
        "categorical.parquet": root / "categorical.parquet",
    }


def test_the_same_lines_in_every_format_give_the_same_store(tmp_path, tiny_model_dir, capsys):
    reports = {}
    for name, path in mono_inputs(tmp_path).items():
        field = [] if name == "de.txt" else ["--field", "text"] * (name != "de.jsonl")  # default: text
        store = tmp_path / f"S_{name}"
        code, out = prepare(capsys, "prepare", "mono", "--lang", "de", "--input", path, *field,
                            "--tokenizer", tiny_model_dir, "--output", store)  # fmt: skip
        assert code == 0, out
        assert out.startswith("de: 5 lines in 3 documents, ") and "skipped" not in out, out  # 2 blank lines
        reports[name] = inspect(capsys, store, "mono", "de")
    first = reports["de.txt"]
    assert first["lines"] == 5 and first["documents"] == 3
    assert all(report == first for report in reports.values()), reports


def test_small_batches_and_blocks_give_the_same_store(tmp_path, tiny_model_dir, monkeypatch):
    from infoxlm.corpus import record_files

    paths = mono_inputs(tmp_path)
    plain = prepare_monolingual("de", [paths["de.txt"]], tiny_model_dir, tmp_path / "a", show_progress=False)
    monkeypatch.setattr(record_files, "BATCH_ROWS", 2)
    for name in ("de.jsonl", "de.parquet", "parts"):
        result = prepare_monolingual("de", [paths[name]], tiny_model_dir, tmp_path / f"S_{name}", show_progress=False,
                                     block_bytes=16)  # fmt: skip
        assert result.meta["counts"] == plain.meta["counts"] and result.meta["skipped"] == plain.meta["skipped"]


def test_newlines_in_a_value_and_a_document_field(tmp_path, tiny_model_dir, capsys):
    a, b, c = LINES[0], LINES[1], LINES[3]
    text = tmp_path / "de.txt"
    text.write_text(f"{a}\n{b}\n\n{c}\n\n{a}\n", encoding="utf-8")
    # One record per document; a blank line inside a value ends a document, as in a text file.
    by_value = write_jsonl(tmp_path / "values.jsonl", [{"text": f"{a}\n{b}\n\n"}, {"text": f"{c}\r\n\r\n{a}"}])
    # One record per line; the document id changes where the text file has its blank lines.
    by_id = write_jsonl(tmp_path / "ids.jsonl", [{"text": t, "doc": d} for t, d in [(a, 1), (b, 1), (c, 2), (a, 3)]])
    reports = []
    for path, extra in ((text, []), (by_value, []), (by_id, ["--doc-field", "doc"])):
        store = tmp_path / f"S_{path.name}"
        code, out = prepare(capsys, "prepare", "mono", "--lang", "de", "--input", path, *extra,
                            "--tokenizer", tiny_model_dir, "--output", store)  # fmt: skip
        assert code == 0 and out.startswith("de: 4 lines in 3 documents"), out
        reports.append(inspect(capsys, store, "mono", "de"))
    assert reports[0] == reports[1] == reports[2]
    meta = json.loads((tmp_path / "S_ids.jsonl/mono/de/meta.json").read_text())
    assert meta["options"]["field"] == "text" and meta["options"]["doc_field"] == "doc"


def test_null_values_are_empty_lines(tmp_path, tiny_model_dir):
    path = write_jsonl(tmp_path / "de.jsonl", [{"text": LINES[0]}, {"text": None}, {"text": LINES[1]}])
    result = prepare_monolingual("de", [path], tiny_model_dir, tmp_path / "s", show_progress=False)
    assert result.meta["counts"]["lines"] == 2 and result.meta["counts"]["documents"] == 2
    assert result.meta["counts"]["blank_lines"] == 1 and result.meta["skipped"]["empty"] == 0


def test_a_lone_surrogate_is_skipped_and_counted_with_skip_invalid(tmp_path, tiny_model_dir):
    path = write_jsonl(tmp_path / "de.jsonl", [{"text": LINES[0]}, '{"text": "\\udc80 Hallo"}', {"text": LINES[1]}])
    result = prepare_monolingual("de", [path], tiny_model_dir, tmp_path / "s", skip_invalid=True, show_progress=False)
    assert result.meta["counts"]["lines"] == 2 and result.meta["skipped"]["invalid_utf8"] == 1
    pairs = write_jsonl(tmp_path / "pairs.jsonl", [{"en": "Hello.", "de": "Hallo."}, '{"en": "Yes.", "de": "\\ud800"}'])
    with pytest.raises(DataError, match=r"pairs.jsonl:2: field 'de' holds a lone surrogate \(\\ud800\) at character 0"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "p", input=pairs, show_progress=False)
    result = prepare_parallel("en-de", tiny_model_dir, tmp_path / "p", input=pairs, skip_invalid=True, show_progress=False)
    assert result.meta["counts"]["pairs"] == 1 and result.meta["skipped"]["invalid_utf8"] == 1


def test_parallel_records_give_the_store_of_two_files(tmp_path, tiny_model_dir, capsys):
    (tmp_path / "en.txt").write_text("\n".join(EN) + "\n", encoding="utf-8")
    (tmp_path / "de.txt").write_text("\n".join(DE) + "\n", encoding="utf-8")
    records = [{"en": e, "de": d, "score": 0.5} for e, d in zip(EN, DE)]
    write_jsonl(tmp_path / "pairs.jsonl", records)
    pq.write_table(pa.table({"source": EN, "target": DE}), tmp_path / "pairs.parquet")
    save_dataset(tmp_path / "saved", {"en": EN, "de": DE})
    runs = {
        "two files": ["--src", tmp_path / "en.txt", "--tgt", tmp_path / "de.txt"],
        "jsonl": ["--input", tmp_path / "pairs.jsonl"],  # fields default to the pair's languages
        "parquet": ["--input", tmp_path / "pairs.parquet", "--src-field", "source", "--tgt-field", "target"],
        "saved": ["--input", tmp_path / "saved", "--src-field", "en", "--tgt-field", "de"],
    }
    reports = {}
    for name, inputs in runs.items():
        store = tmp_path / f"S_{name}"
        code, out = prepare(capsys, "prepare", "parallel", "--pair", "en-de", *inputs,
                            "--tokenizer", tiny_model_dir, "--output", store)  # fmt: skip
        assert code == 0 and out.startswith("en-de: 2 pairs"), out
        reports[name] = inspect(capsys, store, "parallel", "en-de")
    assert all(report == reports["two files"] for report in reports.values()), reports
    meta = json.loads((tmp_path / "S_parquet/parallel/en-de/meta.json").read_text())
    assert meta["format"] == "parquet" and meta["options"]["src_field"] == "source"


def test_fields_and_directory_files_are_part_of_the_fingerprint(tmp_path, tiny_model_dir, capsys):
    inputs = mono_inputs(tmp_path)
    # Text the tokenizer covers: a high <unk> rate would add a warning to the output.
    write_jsonl(tmp_path / "two.jsonl", [{"text": "Öffne die Datei.", "body": "Die Katze."}])
    args = ["prepare", "mono", "--lang", "de", "--tokenizer", tiny_model_dir, "--output", tmp_path / "s", "--input"]
    assert prepare(capsys, *args, tmp_path / "two.jsonl")[1].startswith("de: 1 lines")
    assert prepare(capsys, *args, tmp_path / "two.jsonl")[1].strip() == "de: up to date"
    assert prepare(capsys, *args, tmp_path / "two.jsonl", "--field", "text")[1].strip() == "de: up to date"
    assert "up to date" not in prepare(capsys, *args, tmp_path / "two.jsonl", "--field", "body")[1]

    assert prepare(capsys, *args, inputs["parts"])[1].startswith("de: 5 lines")
    assert prepare(capsys, *args, inputs["parts"])[1].strip() == "de: up to date"
    pq.write_table(pa.table({"id": [9], "text": ["Hallo Welt."]}), inputs["parts"] / "part-2.parquet")
    assert prepare(capsys, *args, inputs["parts"])[1].startswith("de: 6 lines")
    meta = json.loads((tmp_path / "s/mono/de/meta.json").read_text())
    assert [name for name, _, _ in meta["sources"][0]["files"]] == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]


def test_input_kinds_are_told_by_name(tmp_path):
    paths = mono_inputs(tmp_path)
    kinds = {name: input_source(path, "--input").kind for name, path in paths.items()}
    assert kinds == {"de.txt": "text", "de.jsonl": "jsonl", "de.jsonl.gz": "jsonl", "de.parquet": "parquet",
                     "parts": "parquet", "saved": "saved-dataset", "categorical.parquet": "parquet"}  # fmt: skip
    assert HubDataset.parse("hf:wikitext:wikitext-2-raw-v1") == HubDataset("wikitext", "wikitext-2-raw-v1", "train")
    assert str(HubDataset.parse("hf:org/name::validation".replace("::", ":x:"))) == "hf:org/name:x:validation"
    with pytest.raises(DataError, match=r"hf:a:b:c:d: not a dataset name; expected hf:NAME\[:CONFIG\]\[:SPLIT\]"):
        input_source("hf:a:b:c:d", "--input")


# --------------------------------------------------------------------------------------
# hf: through datasets.load_dataset
# --------------------------------------------------------------------------------------


def test_hub_datasets_are_streamed(tmp_path, tiny_model_dir, monkeypatch, capsys):
    datasets = pytest.importorskip("datasets")
    calls = []

    def load_dataset(name, config=None, *, split=None, streaming=False):
        calls.append((name, config, split, streaming))
        rows = [{"text": line, "id": i} for i, line in enumerate(LINES)]
        return datasets.IterableDataset.from_generator(lambda: iter(rows))

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    text = tmp_path / "de.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert prepare(capsys, "prepare", "mono", "--lang", "de", "--input", text, "--tokenizer", tiny_model_dir,
                   "--output", tmp_path / "text")[0] == 0  # fmt: skip
    args = ["prepare", "mono", "--lang", "de", "--input", "hf:someone/corpus:de", "--tokenizer", tiny_model_dir]
    assert infoxlm_main([str(a) for a in args] + ["--output", str(tmp_path / "hub")]) == 0
    err = capsys.readouterr().err
    assert "de: 7 records [" in err, err  # progress counts records: the size is unknown
    assert calls == [("someone/corpus", "de", "train", True)]
    assert inspect(capsys, tmp_path / "hub", "mono", "de") == inspect(capsys, tmp_path / "text", "mono", "de")
    meta = json.loads((tmp_path / "hub/mono/de/meta.json").read_text())
    assert meta["sources"][0]["path"] == "hf:someone/corpus:de:train" and meta["sources"][0]["kept"] == 5


@pytest.mark.parametrize(("spec", "reading"), [
    ("hf:infoxlm-test/no-such-corpus", "split 'train'"),
    ("hf:infoxlm-test/no-such-corpus:train", "config 'train', split 'train'"),
])
def test_an_offline_dataset_not_in_the_cache_is_one_line(tmp_path, tiny_model_dir, offline_hub, spec, reading):
    with pytest.raises(DataError) as error:
        prepare_monolingual("de", [spec], tiny_model_dir, tmp_path / "s", show_progress=False)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{spec} ({reading}): not in the local cache ("), message  # as typed
    assert "and offline (HF_DATASETS_OFFLINE is set); expected a dataset downloaded before" in message
    assert not (tmp_path / "s").exists()


def test_a_missing_package_names_the_extra(tmp_path, tiny_model_dir, monkeypatch):
    inputs = mono_inputs(tmp_path)
    for module in ("pyarrow", "pyarrow.parquet", "pyarrow.ipc", "datasets"):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    expected = {
        "de.parquet": "reading Parquet files needs the pyarrow package; pip install 'infoxlm[parquet]'",
        "saved": "needs the pyarrow package; pip install 'infoxlm[parquet]'",
        "hf:wikitext": "reading hf: datasets needs the datasets package; pip install 'infoxlm[hf-datasets]'",
    }
    for name, message in expected.items():
        source = inputs.get(name, name)
        with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]")):
            prepare_monolingual("de", [source], tiny_model_dir, tmp_path / "s", show_progress=False)
        assert not (tmp_path / "s").exists()


# --------------------------------------------------------------------------------------
# Bad input: one line naming the file, line or row, the value and what was expected
# --------------------------------------------------------------------------------------


def bad_jsonl(*records) -> Callable[[Path], Path]:
    """A maker of ``de.jsonl``: one good record, then ``records`` (a str is written as is)."""
    return lambda root: write_jsonl(root / "de.jsonl", [{"text": "Die Katze."}, *records])


def bad_parquet(columns: dict) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        pq.write_table(pa.table(columns), root / "de.parquet")
        return root / "de.parquet"

    return make


def written(name: str, text: str) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        (root / name).write_text(text, encoding="utf-8")
        return root / name

    return make


def damaged_parquet(root: Path) -> Path:
    """A Parquet file whose footer is intact but whose pages are overwritten with zeros."""
    pq.write_table(pa.table({"text": [f"Die Katze schläft {i}." for i in range(5000)]}), root / "de.parquet")
    data = (root / "de.parquet").read_bytes()
    (root / "de.parquet").write_bytes(data[:4] + bytes(len(data) // 2) + data[4 + len(data) // 2:])
    return root / "de.parquet"


def damaged_parquet_footer(root: Path) -> Path:
    """A Parquet file whose footer's metadata is zeros: pyarrow's reason ends in a newline."""
    pq.write_table(pa.table({"text": ["Die Katze schläft."]}), root / "de.parquet")
    data = (root / "de.parquet").read_bytes()
    (root / "de.parquet").write_bytes(data[:4] + bytes(len(data) - 12) + data[-8:])
    return root / "de.parquet"


def truncated_dataset(root: Path) -> Path:
    """A save_to_disk directory whose Arrow file was cut in half."""
    save_dataset(root / "saved", {"text": [f"Hallo {i}" for i in range(5000)]})
    arrow = next((root / "saved").glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    return root / "saved"


def dataset_dict(root: Path) -> Path:
    save_dataset(root / "dd" / "train", {"text": ["a"]})
    (root / "dd" / "dataset_dict.json").write_text('{"splits": ["train"]}')
    return root / "dd"


BAD_RECORDS = {
    # name: (make the input under a folder, extra options, expected message)
    "invalid_json": (bad_jsonl('{"text": "Hallo'), [],
                     "de.jsonl:2:10: invalid JSON (Unterminated string starting at); expected one JSON object per line"),
    "not_an_object": (bad_jsonl(["Hallo"]), [], "de.jsonl:2: a list, not an object; expected one JSON object per line"),
    "missing_field": (bad_jsonl({"body": "Hallo", "id": 3}), [],
                      "de.jsonl:2: no field 'text'; its fields are 'body', 'id'; expected the name of one of them"),
    "number": (bad_jsonl({"text": 42}), [], "de.jsonl:2: field 'text' is a number (42); expected a string or null"),
    "list": (bad_jsonl({"text": ["a", "b"]}), [], 'de.jsonl:2: field \'text\' is a list (["a", "b"]); expected a string or null'),
    "missing_doc_field": (bad_jsonl(), ["--doc-field", "doc"], "de.jsonl:1: no field 'doc'; its fields are 'text'"),
    "lone_surrogate": (bad_jsonl('{"text": "Hallo \\ud800!"}'), [],
                       "de.jsonl:2: field 'text' holds a lone surrogate (\\ud800) at character 6; expected valid Unicode"),
    "deep_nesting": (bad_jsonl("[" * 100_000), [],
                     "de.jsonl:2: invalid JSON (nested deeper than 100 levels); expected one JSON object per line"),
    "parquet_column": (bad_parquet({"body": ["a"], "id": [1]}), ["--field", "text"],
                       "de.parquet: no field 'text'; its columns are 'body', 'id'; expected the name of one of them"),
    "parquet_type": (bad_parquet({"text": [1, 2]}), [], "de.parquet: column 'text' holds int64; expected strings"),
    "parquet_not_parquet": (written("de.parquet", "Hallo\n"), [], "de.parquet: cannot read as Parquet ("),
    "parquet_damaged_footer": (damaged_parquet_footer, [], "de.parquet: cannot read as Parquet (Couldn't deserialize thrift: "
                               "TProtocolException: Invalid data); expected a Parquet file"),
    "parquet_damaged": (damaged_parquet, [], "de.parquet: damaged: reading stopped at row 0 (Couldn't deserialize thrift: "),
    "arrow_truncated": (truncated_dataset, [], ".arrow: damaged: reading stopped at row "),
    "dataset_dict": (dataset_dict, [], "dd: a dataset with splits train; expected one split's directory, e.g. "),
    "text_with_field": (written("de.txt", "Hallo\n"), ["--field", "body"],
                        "--field names a field of record inputs (JSONL, Parquet, datasets); "),
}


@pytest.mark.parametrize("name", list(BAD_RECORDS))
def test_bad_records_are_one_line_and_leave_nothing_behind(tmp_path, tiny_model_dir, capsys, name):
    make, extra, expected = BAD_RECORDS[name]
    path = make(tmp_path)
    code, out = prepare(capsys, "prepare", "mono", "--lang", "de", "--input", path, *extra,
                        "--tokenizer", tiny_model_dir, "--output", tmp_path / "store")  # fmt: skip
    assert code != 0
    assert len(out.strip().splitlines()) == 1 and out.startswith("infoxlm: error: "), out
    assert expected in out, out
    assert not (tmp_path / "store").exists()


def test_a_document_field_may_hold_any_value(tmp_path):
    pq.write_table(pa.table({"text": ["a", "b", None], "doc": [1, 1, 2]}), tmp_path / "de.parquet")
    blocks = list(record_line_blocks(input_source(tmp_path / "de.parquet", "--input"), "text", "doc"))
    assert [line for block in blocks for line in block.lines] == ["a", "b", "", ""]  # a new id, then null


def test_a_bad_value_in_a_hub_dataset_names_its_row(tmp_path, tiny_model_dir, monkeypatch):
    datasets = pytest.importorskip("datasets")
    rows = [{"text": "Die Katze."}, {"text": "Hallo."}, {"text": 5}]
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: iter(rows))
    with pytest.raises(DataError, match=r"^hf:x: row 2: field 'text' is a number \(5\); expected a string or null$"):
        prepare_monolingual("de", ["hf:x"], tiny_model_dir, tmp_path / "s", show_progress=False)
    assert not (tmp_path / "s").exists()


def test_bad_parallel_input(tmp_path, tiny_model_dir):
    path = write_jsonl(tmp_path / "pairs.jsonl", [{"en": "Hello.", "de": "Hallo."}, {"en": "Yes.", "de": {"x": 1}}])
    with pytest.raises(DataError, match=r"pairs.jsonl:2: field 'de' is an object \(\{\"x\": 1\}\); expected a string or null"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "s", input=path, show_progress=False)
    text = written("pairs.txt", "Hello.\n")(tmp_path)
    with pytest.raises(DataError, match="pairs.txt: not a JSONL, Parquet, TMX or dataset input; expected --tsv"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "s", input=text)
    with pytest.raises(DataError, match="--src-field and --tgt-field name fields of --input records"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "s", tsv=text, src_field="en")
    with pytest.raises(DataError, match="give either --tsv or --src with --tgt .*, not --tsv and --input"):
        prepare_parallel("en-de", tiny_model_dir, tmp_path / "s", tsv=text, input=path)
    assert not (tmp_path / "s").exists()


def test_progress_counts_the_bytes_of_every_format(tmp_path, tiny_model_dir, capsys):
    inputs = mono_inputs(tmp_path)
    (inputs["parts"] / "README.md").write_text("Not read, so not counted.\n")
    for name in ("de.jsonl.gz", "de.parquet", "parts", "saved"):
        args = ["prepare", "mono", "--lang", "de", "--input", str(inputs[name]), "--tokenizer", str(tiny_model_dir)]
        assert infoxlm_main(args + ["--output", str(tmp_path / f"S_{name}")]) == 0
        err = capsys.readouterr().err
        assert "de: 100%" in err and "B/s" in err, (name, err)
