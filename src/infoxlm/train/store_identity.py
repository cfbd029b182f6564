"""What a run was trained on: the store's tokenizer and corpora, to refuse a resume on other data.

A run's steps are functions of (seed, step, store): the same step on another store is another
step. The identity is small and cheap (no pass over the tokens): the tokenizer's SHA-256 and
vocabulary size from ``store.json``, and per corpus its counts and a checksum of its token
and offset files (``file_ends_checksum``). Each checkpoint keeps the identity it was
trained on; ``RUN/store_identity.json`` holds the latest, for people.

    >>> before = {"tokenizer": {"fingerprint": "ab" * 32, "vocab_size": 9}, "corpora": {"mono/de": {"tokens": 5}}}
    >>> after = {"tokenizer": before["tokenizer"], "corpora": {"mono/de": {"tokens": 7}, "mono/fr": {"tokens": 2}}}
    >>> corpus_changes(before, after)
    ['added mono/fr', 'mono/de changed (tokens 5 → 7)']
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from ..data.store import TokenStore
from ..tokenizer_files import check_tokenizer_file

CHECKSUM_EDGE_BYTES = 1 << 20  # read from each end of a corpus file for its checksum
# Files of a Hugging Face XLM-R directory that define its ids (tokenizer.py reads either).
TOKENIZER_FILES = ("tokenizer.json", "sentencepiece.bpe.model")


def store_identity(store: TokenStore) -> dict[str, Any]:
    """{"tokenizer": {"fingerprint", "vocab_size"}, "corpora": {"mono/de": {...}, "parallel/en-de": {...}}}"""
    tokenizer = store.info.get("tokenizer", {})
    corpora: dict[str, dict[str, Any]] = {}
    for language, corpus in store.mono.items():
        corpora[f"mono/{language}"] = {
            "lines": corpus.num_lines,
            "documents": corpus.num_documents,
            "tokens": corpus.num_tokens,
            "checksum": file_ends_checksum(corpus.path),
        }
    for pair, corpus in store.parallel.items():
        corpora[f"parallel/{pair}"] = {
            "pairs": corpus.num_pairs,
            "tokens": corpus.num_tokens,
            "checksum": file_ends_checksum(corpus.path),
        }
    return {
        "tokenizer": {"fingerprint": tokenizer.get("fingerprint"), "vocab_size": tokenizer.get("vocab_size")},
        "corpora": corpora,
    }


def file_ends_checksum(path: Path, edge: int = CHECKSUM_EDGE_BYTES) -> str:
    """SHA-256 over a corpus's token and offset files: each file's name, size, first and last
    ``edge`` bytes. Cheap on a corpus of any size, equal for the same text prepared again
    (wherever its input files lie), different when the text changed almost surely (a change
    in the middle alone keeps the counts only if it keeps every length)."""
    digest = hashlib.sha256()
    for file in sorted(Path(path).glob("*.u32")) + sorted(Path(path).glob("*.i64")):
        size = file.stat().st_size
        digest.update(f"{file.name}:{size}:".encode())
        with open(file, "rb") as f:
            digest.update(f.read(edge))
            if size > edge:
                f.seek(max(edge, size - edge))
                digest.update(f.read(edge))
    return digest.hexdigest()


def tokenizer_change(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """How the tokenizer differs ("tokenizer 1a2b3c4d5e6f… (vocabulary 200) → …"), or None."""
    a, b = before.get("tokenizer", {}), after.get("tokenizer", {})
    if a.get("fingerprint") == b.get("fingerprint"):
        return None
    return f"tokenizer {_short(a.get('fingerprint'))} (vocabulary {a.get('vocab_size')}) → {_short(b.get('fingerprint'))} (vocabulary {b.get('vocab_size')})"


def corpus_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Corpora added, removed or changed between two identities, one phrase each."""
    a, b = before.get("corpora", {}), after.get("corpora", {})
    changes = [f"added {name}" for name in sorted(set(b) - set(a))]
    changes += [f"removed {name}" for name in sorted(set(a) - set(b))]
    for name in sorted(set(a) & set(b)):
        if a[name] != b[name]:
            fields = [f"{k} {a[name].get(k)} → {b[name].get(k)}" for k in sorted(set(a[name]) | set(b[name]))
                      if a[name].get(k) != b[name].get(k) and k != "checksum"]
            changes.append(f"{name} changed ({', '.join(fields) or 'other tokens, same counts'})")
    return changes


def tokenizer_file_fingerprints(directory: str | Path) -> dict[str, str]:
    """SHA-256 of each tokenizer file in a model directory ({} when it has none): the
    fingerprint a store prepared with that file records (``Tokenizer.fingerprint``). A file
    that is not its format at all (a tokenizer.json cut short) is refused as damaged, not
    reported as another tokenizer."""
    found = {}
    for name in TOKENIZER_FILES:
        path = Path(directory) / name
        if os.path.lexists(path):  # what is there but no regular file is named by the check
            found[name] = hashlib.sha256(check_tokenizer_file(path)).hexdigest()
    return found


def _short(fingerprint: str | None) -> str:
    return f"{fingerprint[:12]}…" if fingerprint else "unknown"
