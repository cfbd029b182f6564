"""Reading text from records with named fields: JSON Lines, Parquet, saved and Hub datasets.

The readers turn records into the shapes the text readers give (``prepare`` cleans, dedups
and tokenizes both alike, so the same text in any format makes the same corpus):

* :func:`record_line_blocks` -- one field of every record as :class:`~infoxlm.data.
  text_files.LineBlock` s. A value is a line of text; a value holding newlines is several
  lines, and a blank one among them ends a document, as in a text file. A blank value or
  ``null`` reads as a blank line (it ends a document). With a
  document field, a change of its value ends a document too (read as a blank line, so the
  counts equal those of the same text file with blank lines between documents).
* :func:`input_line_blocks` -- any monolingual input, text file or records, as line blocks:
  the one way ``prepare`` and ``tokenizer train`` read an input;
* :func:`record_pair_blocks` -- two fields as :class:`~infoxlm.corpus.parallel_text.PairBlock`
  s; newlines inside a value become spaces, ``null`` an empty side (the pair is skipped).

Formats, each streamed in batches (never a whole file in memory):

* JSON Lines (``.jsonl``, compressed too): one object per line, blank lines ignored; read
  through :func:`~infoxlm.corpus.text_files.iter_line_blocks`, so errors name ``FILE:LINE``;
* Parquet: ``pyarrow.parquet.ParquetFile.iter_batches`` over each file; errors name the row;
* a ``datasets.Dataset.save_to_disk`` directory: its Arrow stream files (``state.json``
  lists them) read batch by batch with ``pyarrow.ipc``;
* ``hf:NAME[:CONFIG][:SPLIT]``: ``datasets.load_dataset(..., streaming=True)``; offline, the
  dataset is read from the local cache.

Rows are counted from 0 in messages, as ``datasets`` and pandas index them. A value that is
neither a string nor null is an error. ``LineBlock.bytes_read`` and ``PairBlock.bytes_read``
count bytes of the input on disk, except for ``hf:`` inputs, whose size is unknown: there
they count records.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from infoxlm.corpus.inputs import HubDataset, InputSource
from infoxlm.corpus.parallel_text import PairBlock
from infoxlm.corpus.text_files import DEFAULT_BLOCK_BYTES, LineBlock, iter_line_blocks
from infoxlm.errors import DataError, InfoXLMError
from infoxlm.json_files import RECORD_BYTES, parse_json, read_json

__all__ = ["input_line_blocks", "load_hub_dataset", "record_line_blocks", "record_pair_blocks", "require_package"]

# Rows per batch from Parquet and Hub datasets: a few MB of text for sentences or paragraphs.
BATCH_ROWS = 4096
_EXTRAS = {"pyarrow": "parquet", "datasets": "hf-datasets"}
_STRING_TYPES = ("string", "large_string", "string_view", "null")


class _Invalid:
    """A JSON Lines line that is not valid UTF-8 (with ``skip_invalid``): skipped and counted."""


INVALID = _Invalid()
_NO_DOCUMENT = object()  # the document id before an input's first record


def require_package(name: str, what: str) -> ModuleType:
    """Import an optional dependency, or say in one line which extra to install."""
    try:
        return importlib.import_module(name)
    except ImportError:
        package = name.split(".")[0]
        raise DataError(
            f"reading {what} needs the {package} package; pip install 'infoxlm[{_EXTRAS[package]}]'"
        ) from None


@dataclass
class _RecordBatch:
    """Consecutive records of one file: ``values[field][i]`` is that of record ``numbers[i]``."""

    values: dict[str, list[Any]]
    numbers: range | list[int]  # line numbers (JSON Lines, from 1) or row numbers (from 0)
    progress: int  # bytes of the input consumed since the previous batch (records for hf:)
    file: Path | str  # the file (of a directory input) the records come from, or hf:…
    by_line: bool = False  # numbers are line numbers

    def where(self, number: int) -> str:
        return f"{self.file}:{number}" if self.by_line else f"{self.file}: row {number}"


# --------------------------------------------------------------------------------------
# Records -> line blocks / pair blocks
# --------------------------------------------------------------------------------------


def input_line_blocks(
    source: InputSource,
    fields: dict[str, str],
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    skip_invalid: bool = False,
    **read_options: Any,
) -> Iterator[LineBlock]:
    """The lines of one monolingual input: a text file's lines, or the ``fields["field"]``
    values of its records (``fields["doc_field"]`` ending documents), blank lines included.

    ``fields`` is what :func:`~infoxlm.corpus.inputs.record_fields` gives for the inputs;
    ``read_options`` (a byte or line range, a bound on long lines) apply to text files only.
    """
    if source.has_records:
        return record_line_blocks(source, fields["field"], fields.get("doc_field"), block_bytes, skip_invalid)
    assert source.path is not None
    return iter_line_blocks(source.path, block_bytes, skip_invalid, **read_options)


def record_line_blocks(
    source: InputSource,
    field: str,
    doc_field: str | None = None,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    skip_invalid: bool = False,
) -> Iterator[LineBlock]:
    """The ``field`` values of ``source`` as lines (see the module docstring)."""
    first_line, document = 1, _NO_DOCUMENT
    for batch in _record_batches(source, [field], doc_field, block_bytes, skip_invalid):
        lines: list[str | None] = []
        documents = batch.values[doc_field] if doc_field is not None else None
        for i, (number, value) in enumerate(zip(batch.numbers, batch.values[field])):
            if documents is not None and documents[i] is not INVALID:
                if document is not _NO_DOCUMENT and documents[i] != document:
                    lines.append("")  # a new document id ends the document, as a blank line
                document = documents[i]
            lines.extend(_value_lines(_checked(value, batch, field, number)))
        yield LineBlock(Path(str(source.label)), first_line, lines, batch.progress)
        first_line += len(lines)


def record_pair_blocks(
    source: InputSource,
    src_field: str,
    tgt_field: str,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    skip_invalid: bool = False,
) -> Iterator[PairBlock]:
    """The ``src_field`` and ``tgt_field`` values of ``source`` as translation pairs."""
    for batch in _record_batches(source, [src_field, tgt_field], None, block_bytes, skip_invalid):
        sides = []
        for field in (src_field, tgt_field):
            values = zip(batch.numbers, batch.values[field])
            sides.append([_value_side(_checked(value, batch, field, number)) for number, value in values])
        yield PairBlock(sides[0], sides[1], batch.progress)


_KINDS = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}


def _checked(value: Any, batch: _RecordBatch, field: str, number: int) -> str | None | _Invalid:
    if value is None or value is INVALID or isinstance(value, str):
        return value
    kind = _KINDS.get(type(value), f"a {type(value).__name__}")
    shown = json.dumps(value, ensure_ascii=False, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise DataError(f"{batch.where(number)}: field {field!r} is {kind} ({shown}); expected a string or null")


def _value_lines(value: str | None | _Invalid) -> list[str | None]:
    if value is INVALID:
        return [None]
    if not value:
        return [""]
    if "\r" in value:
        value = value.replace("\r\n", "\n")
    if value.endswith("\n"):  # a value's final line break does not begin another line
        value = value[:-1]
    return value.split("\n")  # type: ignore[return-value]


def _value_side(value: str | None | _Invalid) -> str | None:
    if value is INVALID:
        return None
    return (value or "").replace("\r\n", " ").replace("\n", " ")


# --------------------------------------------------------------------------------------
# The formats: each yields _RecordBatch es holding the text fields and the document field
# --------------------------------------------------------------------------------------


def _record_batches(
    source: InputSource, text_fields: list[str], doc_field: str | None, block_bytes: int, skip_invalid: bool
) -> Iterator[_RecordBatch]:
    if source.kind == "jsonl":
        return _jsonl_batches(source, text_fields, doc_field, block_bytes, skip_invalid)
    if source.kind == "parquet":
        return _parquet_batches(source, text_fields, doc_field)
    if source.kind == "saved-dataset":
        return _saved_dataset_batches(source, text_fields, doc_field)
    if source.kind == "hf":
        return _hub_batches(source.dataset, text_fields, doc_field)
    raise ValueError(f"{source.label}: a {source.kind} input has no records")


def _missing_field(where: str, field: str, present: list[str], what: str = "fields") -> DataError:
    names = ", ".join(repr(name) for name in present) or "none"
    return DataError(f"{where}: no field {field!r}; its {what} are {names}; expected the name of one of them")


def _fields(text_fields: list[str], doc_field: str | None) -> list[str]:
    return text_fields if doc_field is None else [*text_fields, doc_field]


def _jsonl_batches(
    source: InputSource, text_fields: list[str], doc_field: str | None, block_bytes: int, skip_invalid: bool
) -> Iterator[_RecordBatch]:
    fields = _fields(text_fields, doc_field)
    for block in iter_line_blocks(source.path, block_bytes, skip_invalid):
        values: dict[str, list[Any]] = {field: [] for field in fields}
        numbers: list[int] = []
        for number, line in enumerate(block.lines, start=block.first_line):
            if line is None:
                record: dict[str, Any] = dict.fromkeys(fields, INVALID)
            elif not line.strip():
                continue
            else:
                record = _parse_json_line(source, number, line)
                if _has_lone_surrogate(record, text_fields, f"{source.label}:{number}", skip_invalid):
                    record = dict.fromkeys(fields, INVALID)  # not Unicode: skipped as invalid UTF-8 is
            for field in fields:
                if field not in record:
                    raise _missing_field(f"{source.label}:{number}", field, list(record))
                values[field].append(record[field])
            numbers.append(number)
        block.lines = []
        yield _RecordBatch(values, numbers, block.bytes_read, source.label, by_line=True)


def _parse_json_line(source: InputSource, number: int, line: str) -> dict[str, Any]:
    record = parse_json(line, source.label, what="one JSON object per line", error=DataError, line=number)
    if not isinstance(record, dict):
        kind = _KINDS.get(type(record), "a string" if isinstance(record, str) else "null")
        raise DataError(f"{source.label}:{number}: {kind}, not an object; expected one JSON object per line")
    return record


def _has_lone_surrogate(record: dict[str, Any], text_fields: list[str], where: str, skip_invalid: bool) -> bool:
    """Whether a text field holds a lone surrogate (JSON's ``"\\ud800"`` escape decodes to one,
    though it is no Unicode character and has no UTF-8 form); an error unless ``skip_invalid``."""
    for field in text_fields:
        value = record.get(field)
        if not isinstance(value, str) or value.isascii():
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            if skip_invalid:
                return True
            raise DataError(
                f"{where}: field {field!r} holds a lone surrogate (\\u{ord(value[exc.start]):04x}) at character "
                f"{exc.start}; expected valid Unicode (--skip-invalid skips such records)"
            ) from None
    return False


def _check_schema(schema: Any, text_fields: list[str], doc_field: str | None, where: Path) -> None:
    """Every field is a column; the text fields hold strings (or only nulls)."""
    for field in _fields(text_fields, doc_field):
        if field not in schema.names:
            raise _missing_field(str(where), field, list(schema.names), "columns")
    for field in text_fields:
        kind = schema.field(field).type
        # A dictionary-encoded column (a pandas categorical) holds strings too; to_pylist
        # decodes it.
        if str(getattr(kind, "value_type", kind)) not in _STRING_TYPES:
            raise DataError(f"{where}: column {field!r} holds {kind}; expected strings")


def _columns(batch: Any, fields: list[str]) -> dict[str, list[Any]]:
    return {field: batch.column(field).to_pylist() for field in fields}


def _parquet_batches(source: InputSource, text_fields: list[str], doc_field: str | None) -> Iterator[_RecordBatch]:
    parquet = require_package("pyarrow.parquet", "Parquet files")
    fields = _fields(text_fields, doc_field)
    for path in source.parquet_files():
        try:
            file = parquet.ParquetFile(path)
        except Exception as exc:  # pyarrow's errors for a file that is not Parquet
            raise DataError(f"{path}: cannot read as Parquet ({_reason(exc)}); expected a Parquet file") from None
        with file:
            _check_schema(file.schema_arrow, text_fields, doc_field, path)
            size, rows = path.stat().st_size, max(file.metadata.num_rows, 1)
            row = reported = 0
            for batch in _readable(file.iter_batches(batch_size=BATCH_ROWS, columns=fields), path, "Parquet file"):
                numbers = range(row, row + batch.num_rows)
                row += batch.num_rows
                done = size * row // rows  # bytes in proportion to the rows read
                yield _RecordBatch(_columns(batch, fields), numbers, done - reported, path)
                reported = done


def _saved_dataset_batches(
    source: InputSource, text_fields: list[str], doc_field: str | None
) -> Iterator[_RecordBatch]:
    """The Arrow stream files that ``state.json`` lists, in its order, batch by batch."""
    pyarrow = require_package("pyarrow", "datasets saved with save_to_disk")
    require_package("pyarrow.ipc", "datasets saved with save_to_disk")
    fields = _fields(text_fields, doc_field)
    assert source.path is not None
    row = 0
    for path in _saved_dataset_files(source.path):
        with pyarrow.OSFile(str(path)) as raw:
            try:
                reader = pyarrow.ipc.open_stream(raw)
            except Exception as exc:  # pyarrow.ArrowInvalid and kin
                raise DataError(
                    f"{path}: cannot read as an Arrow stream ({_reason(exc)}); expected a save_to_disk file"
                ) from None
            _check_schema(reader.schema, text_fields, doc_field, source.path)
            reported = 0
            for batch in _readable(reader, path, "save_to_disk file"):
                numbers = range(row, row + batch.num_rows)
                row += batch.num_rows
                done = raw.tell()
                yield _RecordBatch(_columns(batch, fields), numbers, done - reported, source.path)
                reported = done
            rest = path.stat().st_size - reported  # the stream's end marker: progress ends at 100%
            yield _RecordBatch({field: [] for field in fields}, range(row, row), rest, source.path)


def _readable(batches: Iterable[Any], path: Path, kind: str) -> Iterator[Any]:
    """pyarrow's record batches of ``path``; a damaged file (pyarrow raises an ``OSError`` or
    ``ArrowInvalid`` that names no file) is a DataError naming it, the row and pyarrow's reason."""
    batches, row = iter(batches), 0
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:  # pyarrow's errors for damaged data
            raise DataError(f"{path}: damaged: reading stopped at row {row} ({_reason(exc)}); expected a complete {kind}") from None
        row += batch.num_rows
        yield batch


def _reason(exc: Exception) -> str:
    """pyarrow's reason on one line: some of its messages end in a newline, or go on below."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _saved_dataset_files(path: Path) -> list[Path]:
    state = path / "state.json"
    expected = "the state.json of datasets.save_to_disk"
    entries = read_json(state, what=expected, max_bytes=RECORD_BYTES, error=DataError)
    try:
        files = [path / entry["filename"] for entry in entries["_data_files"]]
    except (KeyError, TypeError) as exc:
        raise DataError(f"{state}: unreadable ({exc}); expected {expected}") from None
    for file in files:
        if not file.is_file():
            raise DataError(
                f"{file}: no such file, though {state} lists it; expected a complete save_to_disk directory"
            )
    return files


def _hub_batches(dataset: HubDataset, text_fields: list[str], doc_field: str | None) -> Iterator[_RecordBatch]:
    """Rows of a Hub dataset, streamed; offline, from the local cache. Progress: records."""
    fields = _fields(text_fields, doc_field)
    rows = iter(load_hub_dataset(dataset))
    row = 0
    while True:
        try:
            chunk = [record for _, record in zip(range(BATCH_ROWS), rows)]
        except Exception as exc:  # a connection lost while streaming, a damaged cache file
            raise DataError(
                f"{dataset}: reading stopped at row {row} ({_first_line(exc)}); expected a readable dataset"
            ) from None
        if not chunk:
            return
        for field in fields:
            if field not in chunk[0]:
                raise _missing_field(f"{dataset}: row {row}", field, list(chunk[0]))
        values = {field: [record.get(field) for record in chunk] for field in fields}
        yield _RecordBatch(values, range(row, row + len(chunk)), len(chunk), str(dataset))
        row += len(chunk)


def load_hub_dataset(dataset: HubDataset, *, streaming: bool = True, error: type[InfoXLMError] = DataError) -> Any:
    """``datasets.load_dataset`` of an ``hf:`` input: streamed (``prepare`` reads it once), or
    downloaded and cached (evaluation and fine-tuning data, read again by every run).

    Every command that reads ``hf:`` data loads it here, so that each says the same thing
    when it fails: offline (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE, or no network) a dataset
    downloaded before is read from the local cache, and one that is not there is one line
    naming the dataset, how its name was read, the cache and why the Hub is out of reach,
    instead of whatever ``datasets`` raises then (``BuilderConfig 'en' not found``).
    Messages are raised as ``error`` (the calling command's kind of DataError).
    """
    try:
        datasets = require_package("datasets", "hf: datasets")
    except DataError as err:
        raise error(str(err)) from None
    kwargs = {"streaming": True} if streaming else {}
    try:
        return datasets.load_dataset(dataset.name, dataset.config, split=dataset.split, **kwargs)
    except Exception as exc:  # unknown name, config or split; no network
        failure = exc
    offline = _offline_reason(datasets, failure)
    if offline is None:
        raise error(
            f"{dataset} ({dataset.reading}): cannot load it ({_first_line(failure)}); expected a dataset on the Hugging Face Hub"
        )
    if streaming:
        try:  # offline: a dataset downloaded before is in the local cache
            return datasets.load_dataset(dataset.name, dataset.config, split=dataset.split)
        except Exception:
            pass
    cache = getattr(getattr(datasets, "config", None), "HF_DATASETS_CACHE", "the datasets cache")
    raise error(
        f"{dataset} ({dataset.reading}): not in the local cache ({cache}) and offline ({offline}); "
        "expected a dataset downloaded before, with network access"
    )


def _offline_reason(datasets: ModuleType, error: BaseException) -> str | None:
    """Why the Hub cannot be reached (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE set, or the
    error chain says there is no network), or None when it can."""
    for variable in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        if os.environ.get(variable, "").upper() in ("1", "ON", "YES", "TRUE"):
            return f"{variable} is set"
    if getattr(getattr(datasets, "config", None), "HF_HUB_OFFLINE", False):
        return "HF_HUB_OFFLINE is set"
    seen: BaseException | None = error
    while seen is not None:
        name = type(seen).__name__
        if isinstance(seen, (ConnectionError, TimeoutError)) or "Connect" in name or "Offline" in name:
            return "no network"
        seen = seen.__cause__ or seen.__context__
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
