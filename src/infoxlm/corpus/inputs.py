"""What one input of ``infoxlm prepare`` is, told from its name alone, and its fingerprint.

An input is one of (first match wins):

* ``hf:NAME[:CONFIG][:SPLIT]`` -- a Hugging Face Hub dataset, read through ``datasets``;
* a directory with ``state.json`` and ``dataset_info.json`` -- written by
  ``datasets.Dataset.save_to_disk``;
* a directory of ``.parquet`` files (searched recursively, read in sorted order of their
  paths), or one ``.parquet`` file;
* a ``.jsonl`` file, plain or compressed (``.jsonl.gz``, ``.jsonl.zst``, …);
* a ``.tmx`` file, plain or compressed (only where translation pairs are read);
* anything else: a text file, one sentence or paragraph per line.

The fingerprint record of an input is what the up-to-date check compares: path, size and
modification time of a file (of every file, for a directory), or the name, config and split
of an ``hf:`` dataset (whose content cannot be checked without reading it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infoxlm.corpus.text_files import COMPRESSION_SUFFIXES
from infoxlm.errors import DataError

__all__ = ["InputSource", "HubDataset", "input_source", "record_fields", "refuse_url", "RECORD_KINDS"]

PathLike = str | Path

HF_PREFIX = "hf:"
# Kinds whose records have named fields (--field, --src-field, …).
RECORD_KINDS = ("jsonl", "parquet", "saved-dataset", "hf")


@dataclass(frozen=True)
class HubDataset:
    """``hf:NAME[:CONFIG][:SPLIT]``; the split defaults to ``train``. Messages quote it as typed
    (``spec``); the fingerprint and meta.json use the full ``hf:NAME[:CONFIG]:SPLIT``."""

    name: str
    config: str | None
    split: str
    spec: str = field(default="", compare=False)  # as typed on the command line

    @classmethod
    def parse(cls, spec: str) -> HubDataset:
        parts = spec[len(HF_PREFIX) :].split(":")
        if not parts[0] or len(parts) > 3 or any(not part for part in parts[1:]):
            raise DataError(
                f"{spec}: not a dataset name; expected hf:NAME[:CONFIG][:SPLIT], e.g. hf:wikitext:wikitext-2-raw-v1:train"
            )
        name, config, split = (parts + [None, None])[:3]
        return cls(name, config, split or "train", spec)

    @property
    def full_name(self) -> str:
        """``hf:NAME[:CONFIG]:SPLIT``, the split spelled out."""
        return HF_PREFIX + ":".join(part for part in (self.name, self.config, self.split) if part)

    @property
    def reading(self) -> str:
        """How the name was read: ``config 'de', split 'train'``."""
        return (f"config {self.config!r}, " if self.config else "") + f"split {self.split!r}"

    def __str__(self) -> str:
        return self.spec or self.full_name


@dataclass(frozen=True)
class InputSource:
    """One input: ``kind`` (``text``, ``jsonl``, ``parquet``, ``saved-dataset``, ``hf``,
    ``tmx``) and where it is: ``path`` (a file or directory) or ``dataset`` (``hf:``)."""

    kind: str
    path: Path | None = None
    dataset: HubDataset | None = None

    @property
    def label(self) -> Path | str:
        """How messages and meta.json name it: the path as given, or ``hf:…``."""
        return self.path if self.path is not None else str(self.dataset)

    @property
    def has_records(self) -> bool:
        return self.kind in RECORD_KINDS

    def parquet_files(self) -> list[Path]:
        """The ``.parquet`` files of a Parquet input, in reading order."""
        assert self.path is not None
        if self.path.is_file():
            return [self.path]
        return sorted(self.path.rglob("*.parquet"), key=lambda p: p.relative_to(self.path).as_posix())

    def fingerprint_record(self) -> dict[str, Any]:
        """``{"path", "bytes", "mtime_ns"}`` of a file (as for text files); for a directory
        ``files`` (``[relative path, bytes, mtime_ns]`` of each) and in ``bytes`` the size of
        the data files read; for ``hf:`` the dataset as ``path`` and ``bytes`` None."""
        if self.dataset is not None:
            return {"path": self.dataset.full_name, "bytes": None, "format": self.kind}
        assert self.path is not None
        if self.path.is_file():
            stat = self.path.stat()
            record = {"path": str(self.path.resolve()), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
            return record if self.kind == "text" else {**record, "format": self.kind}
        files = []
        for file in sorted(p for p in self.path.rglob("*") if p.is_file()):
            stat = file.stat()
            files.append([file.relative_to(self.path).as_posix(), stat.st_size, stat.st_mtime_ns])
        read = ".parquet" if self.kind == "parquet" else ".arrow"  # the bytes progress counts
        total = sum(size for name, size, _ in files if name.endswith(read))
        return {"path": str(self.path.resolve()), "bytes": total, "files": files, "format": self.kind}


def _without_compression(name: str) -> str:
    lower = name.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if lower.endswith(suffix):
            return lower[: -len(suffix)]
    return lower


def input_source(spec: PathLike, flag: str, allow_tmx: bool = False) -> InputSource:
    """Classify one input named on the command line (``flag`` names the option in errors).

    Raises:
        DataError: a missing path, a directory that is neither a saved dataset nor holds
            ``.parquet`` files, a ``DatasetDict`` directory, a malformed ``hf:`` name.
    """
    if isinstance(spec, str) and spec.startswith(HF_PREFIX):
        return InputSource("hf", dataset=HubDataset.parse(spec))
    refuse_url(spec, flag)
    path = Path(spec)
    if not path.exists():
        raise DataError(f"{path}: no such file or directory; expected {flag} to name an input")
    if path.is_dir():
        return InputSource(_directory_kind(path), path)
    if not path.is_file():
        raise DataError(f"{path}: not a file; expected a UTF-8 text file")
    name = _without_compression(path.name)
    if name.endswith(".parquet"):
        return InputSource("parquet", path)
    if name.endswith(".jsonl"):
        return InputSource("jsonl", path)
    if name.endswith(".tmx") and allow_tmx:
        return InputSource("tmx", path)
    return InputSource("text", path)


def refuse_url(spec: PathLike, flag: str) -> None:
    """A one-process prepare reads local files: an fsspec URL is refused, saying what reads it."""
    if isinstance(spec, str) and "://" in spec:
        raise DataError(
            f"{spec}: a URL; expected a local file for {flag} (URLs are read by `infoxlm prepare … --executor "
            "local --tasks N`, which copies them first)"
        )


def record_fields(sources: list[InputSource], field: str | None, doc_field: str | None = None) -> dict[str, str]:
    """The record fields read from monolingual ``sources``: ``{"field": field or "text"}``, with
    ``doc_field`` if given; ``{}`` when every input is a text file.

    Raises:
        DataError: ``field`` or ``doc_field`` given, but no input has records.
    """
    if not any(source.has_records for source in sources):
        if field is not None or doc_field is not None:
            flag = "--field" if field is not None else "--doc-field"
            raise DataError(f"{flag} names a field of record inputs (JSONL, Parquet, datasets); "
                            f"{sources[0].label} is a text file")  # fmt: skip
        return {}
    return {"field": field or "text", **({"doc_field": doc_field} if doc_field is not None else {})}


def _directory_kind(path: Path) -> str:
    if (path / "dataset_dict.json").is_file():
        splits = sorted(p.name for p in path.iterdir() if (p / "state.json").is_file())
        raise DataError(
            f"{path}: a dataset with splits {', '.join(splits) or '(none)'}; "
            f"expected one split's directory, e.g. {path / (splits[0] if splits else 'train')}"
        )
    if (path / "state.json").is_file() and (path / "dataset_info.json").is_file():
        return "saved-dataset"
    if next(path.rglob("*.parquet"), None) is not None:
        return "parquet"
    raise DataError(
        f"{path}: a directory without .parquet files or a saved dataset (state.json); "
        "expected a file, a directory of .parquet files or a datasets.save_to_disk directory"
    )
