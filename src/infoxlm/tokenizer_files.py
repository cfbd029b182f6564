"""The two tokenizer file formats behind one small interface, and the files a saved tokenizer holds.

* ``tokenizer.json`` -- a Hugging Face ``tokenizers`` serialisation (preferred), checked to
  hold XLM-R's special-token layout;
* ``sentencepiece.bpe.model`` -- a SentencePiece model exactly as XLM-R ships it, whose own
  ids (``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2, pieces from 3) are shifted to fairseq's.

:func:`open_tokenizer_file` finds the file in a directory (or takes it as named) and returns
the backend that reads it; :class:`~infoxlm.tokenizer.Tokenizer` frames, pads and saves on top.
:func:`transformers_configs` is what ``transformers`` needs next to the file to load it as an
``XLMRobertaTokenizer`` with the same ids.

>>> sorted(transformers_configs(mask_id=9)[TOKENIZER_CONFIG]["added_tokens_decoder"])
['0', '1', '2', '3', '9']
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from infoxlm.errors import TokenizerError
from infoxlm.json_files import TOKENIZER_BYTES, parse_json, read_small_file
from infoxlm.special_tokens import BOS, EOS, MASK, PAD, SPECIAL_IDS, UNK

__all__ = [
    "Backend",
    "LEADING_SPECIALS",
    "METASPACE",
    "MODEL_MAX_LENGTH",
    "SENTENCEPIECE_MODEL",
    "SPECIAL_TOKENS_MAP",
    "TOKENIZER_CONFIG",
    "TOKENIZER_JSON",
    "check_tokenizer_file",
    "open_tokenizer_file",
    "transformers_configs",
]

TOKENIZER_JSON = "tokenizer.json"
SENTENCEPIECE_MODEL = "sentencepiece.bpe.model"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
MODEL_MAX_LENGTH = 512

# The four specials that sit at fixed ids in front of the vocabulary; <mask> comes last.
LEADING_SPECIALS = tuple(SPECIAL_IDS)  # (<s>, <pad>, </s>, <unk>), in id order
METASPACE = "\u2581"  # "▁", SentencePiece's visible space


class Backend:
    """What :class:`~infoxlm.tokenizer.Tokenizer` needs from a file format: pieces in, pieces out.

    ``encode_many`` returns XLM-R ids *without* ``<s>``/``</s>``; the wrapper adds those
    itself so that both formats truncate and frame sequences identically.
    """

    name: str
    vocab_size: int

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        raise NotImplementedError

    def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        raise NotImplementedError

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        raise TokenizerError(
            f"{self.name} tokenizer: character offsets need a tokenizer.json (Hugging Face tokenizers) "
            "model directory; save the tokenizer as tokenizer.json"
        )


class TokenizersBackend(Backend):
    """A ``tokenizers`` JSON file, validated to hold XLM-R's special-token layout."""

    name = "tokenizers"

    def __init__(self, path: Path, data: bytes):
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import pre_tokenizers

        try:
            self._tok = HFTokenizer.from_str(data.decode("utf-8"))
        except Exception as exc:  # tokenizers raises plain Exception on bad JSON
            check_tokenizer_file(path, data)  # a file that is not JSON at all is called damaged
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TokenizerError(
                f"{path}: not a valid tokenizers JSON file ({first_line}); "
                "expected a Hugging Face tokenizer.json"
            ) from None
        # Padding/truncation baked into a JSON would silently change our output; the wrapper
        # does both itself.
        self._tok.no_padding()
        self._tok.no_truncation()
        # SentencePiece (and transformers 5's XLM-R loader) split on whitespace before adding
        # "▁"; a bare Metaspace would turn trailing whitespace into an extra "▁" token.
        if isinstance(self._tok.pre_tokenizer, pre_tokenizers.Metaspace):
            self._tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.WhitespaceSplit(), self._tok.pre_tokenizer]
            )
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        expected = {**SPECIAL_IDS, MASK: self.vocab_size - 1}
        for token, want in expected.items():
            got = self._tok.token_to_id(token)
            if got != want:
                found = "missing" if got is None else f"at id {got}"
                raise TokenizerError(
                    f"{path}: special token {token} is {found}, expected id {want} "
                    f"(XLM-R layout: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=vocab_size-1={self.vocab_size - 1})"
                )

        self._path = path

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        if len(texts) == 1:  # skip the thread pool for the common single-text call
            return [_without_panics(self._path, lambda: self._tok.encode(texts[0], add_special_tokens=False)).ids]
        # Only ids are used: encode_batch_fast (tokenizers >= 0.20) skips the character
        # offsets, a third of the work on large batches; the ids are the same.
        encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)
        return [enc.ids for enc in _without_panics(self._path, lambda: encode(texts, add_special_tokens=False))]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        encoding = _without_panics(self._path, lambda: self._tok.encode(text, add_special_tokens=False))
        return list(encoding.ids), [tuple(span) for span in encoding.offsets]

    def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)


_T = TypeVar("_T")
# One scratch file per process (a forked worker makes its own: a shared one would mix their
# offsets) and one redirect at a time (two threads swapping file descriptor 2 would leave it
# pointing at the scratch file).
_SCRATCH: tuple[int, IO[bytes]] | None = None
_REDIRECT = threading.Lock()


def _without_panics(path: Path, call: Callable[[], _T]) -> _T:
    """``call()`` (a tokenizers encode), a Rust panic in it raised as a TokenizerError naming
    ``path``. A tokenizer.json whose normalizer or pre-tokenizer regex backtracks past
    Oniguruma's retry limit makes the library panic: a ``PanicException``, which derives from
    BaseException, after Rust's panic report (several lines, a whole backtrace under
    RUST_BACKTRACE=1) is written to file descriptor 2. So stderr is pointed at a scratch file
    for the call: the report is dropped when it panics, and whatever another thread wrote
    meanwhile is copied back when it does not (about 1 µs a call)."""
    global _SCRATCH
    with _REDIRECT:
        if _SCRATCH is None or _SCRATCH[0] != os.getpid():
            _SCRATCH = (os.getpid(), tempfile.TemporaryFile())
        scratch = _SCRATCH[1].fileno()
        saved = os.dup(2)
        os.dup2(scratch, 2)
        panic: BaseException | None = None
        try:
            return call()
        except BaseException as exc:
            if type(exc).__name__ != "PanicException":  # KeyboardInterrupt and real errors pass
                raise
            panic = exc
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            written = os.lseek(scratch, 0, os.SEEK_CUR)
            if written:
                if panic is None:
                    os.write(2, os.pread(scratch, written, 0))
                os.ftruncate(scratch, 0)
                os.lseek(scratch, 0, os.SEEK_SET)
    detail = (str(panic).strip().splitlines() or [type(panic).__name__])[0]
    why = (
        "a regular expression in its normalizer or pre-tokenizer backtracks past Oniguruma's limit on this text; "
        "expected patterns that match in bounded time"
        if "retry-limit" in detail
        else "expected a tokenizer.json the tokenizers library can run"
    )
    raise TokenizerError(f"{path}: the tokenizers library panicked while encoding ({detail}): {why}")


def check_tokenizer_file(path: Path, data: bytes | None = None) -> bytes:
    """The bytes of a tokenizer file (``data``, else read), refused with a ``TokenizerError``
    naming it when they cannot be its format at all: a ``.json`` that is not JSON (a copy cut
    short), a ``.model`` that is no SentencePiece model. Such a file is damaged, not another
    tokenizer; whether it holds XLM-R's layout is :meth:`~infoxlm.tokenizer.Tokenizer.from_pretrained`'s check."""
    if data is None:
        data = _read_tokenizer_file(path)
    if path.suffix == ".json":
        parse_json(data, str(path), what=f"a complete {TOKENIZER_JSON}", error=TokenizerError, problem="damaged: invalid JSON")
        return data
    import sentencepiece as spm

    try:
        spm.SentencePieceProcessor().LoadFromSerializedProto(data)
    except Exception as exc:  # sentencepiece raises RuntimeError/OSError variants
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TokenizerError(
            f"{path}: damaged: not a SentencePiece model ({first_line}); expected a complete {SENTENCEPIECE_MODEL}"
        ) from None
    return data


class SentencePieceBackend(Backend):
    """An XLM-R ``sentencepiece.bpe.model`` with its ids shifted to fairseq's layout.

    SentencePiece numbers ``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2 and pieces from 3; fairseq
    prepends its own dictionary (``<s> <pad> </s> <unk>``) so every piece id ``i >= 3``
    becomes ``i + 1``, SentencePiece's unknown becomes 3 and ``<mask>`` is appended last.
    """

    name = "sentencepiece"

    def __init__(self, path: Path, data: bytes):
        import sentencepiece as spm

        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(data)
        except Exception as exc:  # sentencepiece raises RuntimeError/OSError variants
            raise TokenizerError(
                f"{path}: not a valid SentencePiece model ({exc}); expected an XLM-R sentencepiece.bpe.model"
            ) from None
        layout = {
            "<unk>": (self._sp.unk_id(), 0),
            "<s>": (self._sp.bos_id(), 1),
            "</s>": (self._sp.eos_id(), 2),
        }
        for token, (got, want) in layout.items():
            if got != want:
                raise TokenizerError(
                    f"{path}: SentencePiece id of {token} is {got}, expected {want} "
                    "(XLM-R's model has <unk>=0 <s>=1 </s>=2, pieces from 3)"
                )
        self._pieces = self._sp.get_piece_size()
        self.vocab_size = self._pieces + 2  # + <pad> (fairseq only) + <mask>
        self.mask_id = self._pieces + 1
        self._special_ids = {**SPECIAL_IDS, MASK: self.mask_id}
        self._special_names = {i: token for token, i in self._special_ids.items()}
        # tokenizers treats special tokens written literally in the text ("a <mask> b") as
        # those tokens; SentencePiece would spell them out, so split them off first.
        self._special_re = re.compile(
            "|".join(re.escape(t) for t in sorted(self._special_ids, key=len, reverse=True))
        )

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        # Flatten every text into plain segments and literal special tokens, encode all plain
        # segments in one SentencePiece batch call, then stitch each text back together.
        segments: list[str] = []
        layouts: list[list[int | str]] = []  # per text: int = index into segments, str = special
        for text in texts:
            layout: list[int | str] = []
            start = 0
            for match in self._special_re.finditer(text):
                layout.append(len(segments))
                segments.append(text[start : match.start()])
                layout.append(match.group())
                start = match.end()
            layout.append(len(segments))
            segments.append(text[start:])
            layouts.append(layout)
        encoded = self._sp.encode(segments, out_type=int) if segments else []
        result = []
        for layout in layouts:
            ids: list[int] = []
            for item in layout:
                if isinstance(item, str):
                    ids.append(self._special_ids[item])
                else:
                    ids.extend(3 if i == 0 else i + 1 for i in encoded[item])
            result.append(ids)
        return result

    def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        # Mirror tokenizers' Metaspace decoder token by token ("▁" -> " ", drop the space
        # the first token got from the prefix) so both backends decode identically, also
        # when special tokens are kept.
        tokens = []
        for i in ids:
            if i in self._special_names:
                if not skip_special_tokens:
                    tokens.append(self._special_names[i])
            else:
                tokens.append(self._sp.id_to_piece(i - 1))
        text = []
        for position, token in enumerate(tokens):
            token = token.replace(METASPACE, " ")
            if position == 0 and token.startswith(" "):
                token = token[1:]
            text.append(token)
        return "".join(text)


def open_tokenizer_file(path: Path) -> tuple[Backend, Path, bytes, list[Path]]:
    """(backend, the file read, its bytes, other tokenizer files to save with it) for ``path``:
    a directory holding ``tokenizer.json`` or ``sentencepiece.bpe.model``, or either file.

    ``tokenizer.json`` wins when a directory holds both (the other file is still returned, so
    that saving copies it). A named file's suffix says its format: ``.json`` tokenizers,
    ``.model`` SentencePiece.
    """
    extra: list[Path] = []
    if path.is_dir():
        json_file, sp_file = path / TOKENIZER_JSON, path / SENTENCEPIECE_MODEL
        # A file there that is no regular file (a named pipe, a link to a device) is named
        # when it is read, not passed over.
        if os.path.lexists(json_file):
            source, kind = json_file, "json"
            if sp_file.is_file():
                extra.append(sp_file)
        elif os.path.lexists(sp_file):
            source, kind = sp_file, "model"
        else:
            raise TokenizerError(
                f"{path}: holds neither {TOKENIZER_JSON} nor {SENTENCEPIECE_MODEL}; "
                "expected an XLM-R tokenizer directory"
            )
    elif os.path.lexists(path):
        if path.suffix == ".json":
            source, kind = path, "json"
        elif path.suffix == ".model":
            source, kind = path, "model"
        else:
            raise TokenizerError(
                f"{path}: unknown tokenizer file type {path.suffix!r}; "
                f"expected {TOKENIZER_JSON} (.json) or {SENTENCEPIECE_MODEL} (.model)"
            )
    else:
        raise TokenizerError(
            f"{path}: no such tokenizer directory or file; "
            f"expected a directory holding {TOKENIZER_JSON} or {SENTENCEPIECE_MODEL}"
        )
    data = _read_tokenizer_file(source)
    backend: Backend
    if kind == "json":
        backend = TokenizersBackend(source, data)
    else:
        backend = SentencePieceBackend(source, data)
    return backend, source, data, extra


def _read_tokenizer_file(path: Path) -> bytes:
    expected = TOKENIZER_JSON if path.suffix == ".json" else SENTENCEPIECE_MODEL
    return read_small_file(path, what=f"a tokenizer file ({expected})", max_bytes=TOKENIZER_BYTES, error=TokenizerError)


def transformers_configs(mask_id: int) -> dict[str, dict[str, Any]]:
    """``{file name: content}`` of the two configs that make ``transformers.AutoTokenizer``
    load a saved directory as an ``XLMRobertaTokenizer`` with our ids."""
    special_map = {
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": UNK,
        "sep_token": EOS,
        "pad_token": PAD,
        "cls_token": BOS,
        "mask_token": MASK,
    }
    added = {
        str(i): {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for token, i in {**SPECIAL_IDS, MASK: mask_id}.items()
    }
    config = {
        "tokenizer_class": "XLMRobertaTokenizer",
        "model_max_length": MODEL_MAX_LENGTH,
        **special_map,
        "add_prefix_space": True,
        # Keep transformers' decode() equal to ours: no "hello ." -> "hello." rewriting.
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": added,
    }
    return {TOKENIZER_CONFIG: config, SPECIAL_TOKENS_MAP: special_map}
