"""Inputs named by fsspec URLs (``s3://``, ``gs://``, ``hf://datasets/…``, ``memory://``,
``file://``): listed by the launcher, copied to the job's work directory by the tasks.

``infoxlm prepare … --executor`` accepts a URL wherever it accepts an input file; a URL with
``*``, ``?`` or ``[`` is a glob, expanded in sorted order. The launcher lists the objects
(:func:`list_objects`: size and version, cheap, no download) and records them in the job; the
tasks of the staging stage each copy their share of them into ``WORK/inputs``
(:func:`stage_object`), so the prepare tasks then read local files, seeking and splitting them
as ``--shard`` does. A copy is written whole or not at all (a temporary renamed into place), its
modification time set from the object's, so that a copy made again, on any host, fingerprints
the same; a copy already there with the object's size and time is kept.

Credentials come the usual fsspec way (``AWS_*`` variables, ``~/.aws``, ``gcloud`` defaults,
``HF_TOKEN``), and each scheme needs its filesystem package (``s3fs``, ``gcsfs``;
``huggingface_hub`` for ``hf://``).

Example::

    >>> objects = list_objects("s3://corpora/cc100/de-*.txt.zst")   # doctest: +SKIP
    >>> local = [stage_object(o, Path("work/inputs")) for o in objects]   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import fsspec
from tqdm import tqdm

from infoxlm.created_paths import naming
from infoxlm.errors import DataError

__all__ = ["RemoteObject", "is_url", "list_objects", "stage_object", "staged_path"]

_COPY_BYTES = 1 << 22  # read and written per step: memory stays at 4 MiB whatever the object's size
_GLOB = ("*", "?", "[")


def is_url(spec: Any) -> bool:
    """Whether an input is named by an fsspec URL (``scheme://…``) rather than a local path."""
    return isinstance(spec, str) and "://" in spec


@dataclass(frozen=True)
class RemoteObject:
    """One object: its full URL, size in bytes, and version (ETag or modification time, as the
    filesystem reports it; what the job's identity compares)."""

    url: str
    size: int
    version: str
    mtime_ns: int  # given to the local copy, so that its fingerprint is the same on every host

    def record(self) -> dict[str, Any]:
        return asdict(self)


def list_objects(spec: str) -> list[RemoteObject]:
    """The objects a URL names: one, or every match of a glob, in sorted order.

    Raises:
        DataError: no filesystem for the scheme (its package missing), no such object, no
            match of a glob, a directory, an object that cannot be read.
    """
    fs, path = _filesystem(spec)
    try:
        glob = any(c in path for c in _GLOB)
        paths = sorted(fs.glob(path)) if glob else [path]
        if not paths:
            raise DataError(f"{spec}: matches no object; expected a glob that names at least one input file")
        objects = []
        for found in paths:
            info = fs.info(found)
            url = fs.unstrip_protocol(found) if glob else spec  # as typed, unless a glob found it
            if info.get("type") == "directory":
                raise DataError(f"{url}: a directory; expected an input file (or a glob such as {url}/*.txt)")
            objects.append(RemoteObject(url, int(info["size"]), *_version(info)))
        return objects
    except FileNotFoundError:
        raise DataError(f"{spec}: no such object; expected an input file fsspec can read") from None
    except PermissionError as err:
        raise DataError(f"{spec}: permission denied ({err}); expected credentials that may read it") from None


def staged_path(obj: RemoteObject, directory: Path) -> Path:
    """Where the copy of ``obj`` goes: a folder per URL, the object's own name kept (its suffix
    says how it is compressed and whether it holds records)."""
    digest = hashlib.sha256(obj.url.encode("utf-8")).hexdigest()[:16]
    return directory / digest / obj.url.rstrip("/").rpartition("/")[2]


def stage_object(obj: RemoteObject, directory: Path, *, show_progress: bool = False) -> Path:
    """Copy ``obj`` into ``directory`` (unless a copy of its size and time is there); returns the copy.

    Raises:
        DataError: the object is gone, unreadable, or not of the size it was listed with
            (changed since the job was launched).
    """
    target = staged_path(obj, directory)
    if target.is_file():
        stat = target.stat()
        if stat.st_size == obj.size and stat.st_mtime_ns == obj.mtime_ns:
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fs, path = _filesystem(obj.url)
    try:
        with naming(tmp), fs.open(path, "rb") as source, open(tmp, "wb") as copy, tqdm(
            total=obj.size, unit="B", unit_scale=True, unit_divisor=1024, desc=target.name,
            file=sys.stderr, disable=not show_progress, mininterval=0.5,
        ) as progress:  # fmt: skip
            while chunk := source.read(_COPY_BYTES):
                copy.write(chunk)
                progress.update(len(chunk))
        if tmp.stat().st_size != obj.size:
            raise DataError(
                f"{obj.url}: {tmp.stat().st_size:,} bytes read but {obj.size:,} listed; expected the object "
                "unchanged while the job runs (launch again with --force to start over)"
            )
        os.utime(tmp, ns=(obj.mtime_ns, obj.mtime_ns))
        os.replace(tmp, target)
    except FileNotFoundError:
        raise DataError(f"{obj.url}: no such object (gone since the job was launched); expected it unchanged") from None
    except PermissionError as err:
        raise DataError(f"{obj.url}: permission denied ({err}); expected credentials that may read it") from None
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _filesystem(spec: str) -> tuple[Any, str]:
    try:
        return fsspec.core.url_to_fs(spec)
    except (ImportError, ValueError) as err:  # no implementation of the scheme, or not installed
        scheme = spec.partition("://")[0]
        raise DataError(
            f"{spec}: no filesystem for {scheme}:// ({str(err).splitlines()[0]}); expected a scheme fsspec "
            "knows, with its package installed (s3fs for s3://, gcsfs for gs://)"
        ) from None


def _version(info: dict[str, Any]) -> tuple[str, int]:
    """(version, mtime_ns) from an fsspec info record: ETag where the store gives one, else the
    modification (or creation) time; the copy's time is that one, or 0 when there is none."""
    keys = ("mtime", "LastModified", "last_modified", "updated", "created")  # local, s3fs, hf, gcsfs, memory
    stamp = next((info[key] for key in keys if key in info), None)
    seconds = stamp.timestamp() if hasattr(stamp, "timestamp") else stamp if isinstance(stamp, (int, float)) else None
    mtime_ns = int(seconds * 1e9) if seconds is not None else 0
    etag = info.get("ETag") or info.get("etag") or info.get("md5Hash")
    return str(etag if etag else stamp), mtime_ns
