"""XLM-R-compatible tokenizer: load, encode, save and train.

The ids follow XLM-R (and fairseq): ``<s>`` = 0, ``<pad>`` = 1, ``</s>`` = 2, ``<unk>`` = 3,
the SentencePiece pieces after that and ``<mask>`` as the very last id. Two file formats
are understood and behave identically behind one :class:`Tokenizer`:

* ``tokenizer.json`` -- a Hugging Face ``tokenizers`` serialisation (preferred);
* ``sentencepiece.bpe.model`` -- a SentencePiece model exactly as XLM-R ships it, whose own
  ids (``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2, pieces from 3) are shifted to fairseq's.

:meth:`Tokenizer.save_pretrained` writes a directory that ``transformers`` loads as an
``XLMRobertaTokenizer`` with the same ids, and :func:`infoxlm.tokenizer_training.train_tokenizer` learns a new Unigram
vocabulary from raw text with XLM-R's exponentially smoothed language sampling (implemented
in ``tokenizer_training.py``).

Whitespace: text is split on whitespace before the ``▁`` prefix is added, as SentencePiece
does (leading, trailing and repeated whitespace never produce a token). ``transformers`` 5
rebuilds XLM-R tokenizers this way in ``from_pretrained``; a raw XLM-R ``tokenizer.json``
used verbatim (``tokenizers.Tokenizer.from_file`` or ``XLMRobertaTokenizerFast(
tokenizer_file=...)``) instead emits a lone ``▁`` for whitespace at the end of the text or
before a special token written in it. All other text gets identical ids on every path.

Decomposed input: SentencePiece composes NFD text with stacked combining marks (Vietnamese
``e + U+0323 + U+0302`` -> ``ệ``); the ``tokenizers`` port of its normaliser, used for
``tokenizer.json`` here and in ``transformers``, does not and yields ``<unk>``. The two
backends therefore differ on such input only; NFC-normalise text first to avoid it.

Example (trains a toy vocabulary in a temporary directory, so it runs anywhere)::

    >>> import tempfile, pathlib
    >>> from infoxlm.tokenizer import Tokenizer
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "en.txt").write_text("the cat sat on the mat\\nthe dog ate the bone\\n" * 50)
    >>> _ = (tmp / "de.txt").write_text("die katze sitzt auf der matte\\n" * 20)
    >>> from infoxlm.tokenizer_training import train_tokenizer
    >>> tok = train_tokenizer([tmp / "en.txt", tmp / "de.txt"], tmp / "tok", vocab_size=60)
    >>> ids = tok.encode("the cat")
    >>> ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    True
    >>> tok.decode(ids)
    'the cat'
    >>> batch = tok(["the cat", "die katze sitzt"])
    >>> batch["input_ids"].shape == batch["attention_mask"].shape
    True
    >>> Tokenizer.from_pretrained(tmp / "tok").fingerprint == tok.fingerprint
    True
    >>> import shutil; shutil.rmtree(tmp)
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infoxlm.errors import TokenizerError
from infoxlm.special_tokens import BOS, BOS_ID, EOS, EOS_ID, MASK, PAD, PAD_ID, SPECIAL_IDS, UNK, UNK_ID

if TYPE_CHECKING:  # annotations only; see Tokenizer.pad
    import torch

__all__ = [
    "Tokenizer",
    "TOKENIZER_JSON",
    "SENTENCEPIECE_MODEL",
]


PathLike = str | Path

TOKENIZER_JSON = "tokenizer.json"
SENTENCEPIECE_MODEL = "sentencepiece.bpe.model"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
TRAINING_REPORT = "training_report.json"
MODEL_MAX_LENGTH = 512

# The four specials that sit at fixed ids in front of the vocabulary; <mask> comes last.
_LEADING_SPECIALS = tuple(SPECIAL_IDS)  # (<s>, <pad>, </s>, <unk>), in id order
_METASPACE = "\u2581"  # "▁", SentencePiece's visible space

# ISO 639 code (2-3 letters) with optional script/region subtags: de, fil, zh-Hans, pt_BR.
_LANGUAGE_CODE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")


# --------------------------------------------------------------------------------------
# Backends: the two file formats behind one small interface.
# --------------------------------------------------------------------------------------


class _Backend:
    """What :class:`Tokenizer` needs from a file format: pieces in, pieces out.

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


class _TokenizersBackend(_Backend):
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

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        if len(texts) == 1:  # skip the thread pool for the common single-text call
            return [self._tok.encode(texts[0], add_special_tokens=False).ids]
        # Only ids are used: encode_batch_fast (tokenizers >= 0.20) skips the character
        # offsets, a third of the work on large batches; the ids are the same.
        encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)
        return [enc.ids for enc in encode(texts, add_special_tokens=False)]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        encoding = self._tok.encode(text, add_special_tokens=False)
        return list(encoding.ids), [tuple(span) for span in encoding.offsets]

    def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)


def check_tokenizer_file(path: Path, data: bytes | None = None) -> bytes:
    """The bytes of a tokenizer file (``data``, else read), refused with a ``TokenizerError``
    naming it when they cannot be its format at all: a ``.json`` that is not JSON (a copy cut
    short), a ``.model`` that is no SentencePiece model. Such a file is damaged, not another
    tokenizer; whether it holds XLM-R's layout is :meth:`Tokenizer.from_pretrained`'s check."""
    try:
        data = path.read_bytes() if data is None else data
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read tokenizer file ({exc.strerror})") from None
    if path.suffix == ".json":
        try:
            json.loads(data)
            return data
        except UnicodeDecodeError as exc:
            reason = f"not UTF-8 at byte {exc.start}"
        except json.JSONDecodeError as exc:
            reason = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise TokenizerError(f"{path}: damaged: not valid JSON ({reason}); expected a complete tokenizer.json")
    import sentencepiece as spm

    try:
        spm.SentencePieceProcessor().LoadFromSerializedProto(data)
    except Exception as exc:  # sentencepiece raises RuntimeError/OSError variants
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TokenizerError(
            f"{path}: damaged: not a SentencePiece model ({first_line}); expected a complete {SENTENCEPIECE_MODEL}"
        ) from None
    return data


class _SentencePieceBackend(_Backend):
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
            token = token.replace(_METASPACE, " ")
            if position == 0 and token.startswith(" "):
                token = token[1:]
            text.append(token)
        return "".join(text)


# --------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------


class Tokenizer:
    """XLM-R-compatible tokenizer over a ``tokenizer.json`` or ``sentencepiece.bpe.model``.

    Create it with :meth:`from_pretrained` or :meth:`train`, not directly. Every encoding is
    ``<s> pieces </s>``; padding is on the right with ``pad_id``.
    """

    bos_id: int = BOS_ID
    pad_id: int = PAD_ID
    eos_id: int = EOS_ID
    unk_id: int = UNK_ID

    def __init__(self, backend: _Backend, source: Path, data: bytes, extra_files: Sequence[Path] = ()):
        self._backend = backend
        self._source = source  # the file the ids come from
        self._data = data  # its exact bytes: saved verbatim and fingerprinted
        self._extra_files = tuple(extra_files)  # e.g. the .model next to a preferred .json
        self._fingerprint = hashlib.sha256(data).hexdigest()
        #: Set by :meth:`train`; ``None`` for a tokenizer loaded from disk.
        self.training_report = None  # set by train_tokenizer: a tokenizer_training.TrainingReport

    # -- loading -------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, path: PathLike) -> Tokenizer:
        """Load from a directory holding ``tokenizer.json`` or ``sentencepiece.bpe.model``.

        ``tokenizer.json`` wins when both are present (the other file is still copied by
        :meth:`save_pretrained`). ``path`` may also name either file directly: a ``.json``
        suffix means tokenizers format, ``.model`` SentencePiece.

        Raises:
            TokenizerError: missing path, neither file present, unreadable file, or special
                tokens not at XLM-R's ids.
        """
        path = Path(path)
        extra: list[Path] = []
        if path.is_dir():
            json_file, sp_file = path / TOKENIZER_JSON, path / SENTENCEPIECE_MODEL
            if json_file.is_file():
                source, kind = json_file, "json"
                if sp_file.is_file():
                    extra.append(sp_file)
            elif sp_file.is_file():
                source, kind = sp_file, "model"
            else:
                raise TokenizerError(
                    f"{path}: holds neither {TOKENIZER_JSON} nor {SENTENCEPIECE_MODEL}; "
                    "expected an XLM-R tokenizer directory"
                )
        elif path.is_file():
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
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise TokenizerError(f"{source}: cannot read tokenizer file ({exc.strerror})") from None
        backend: _Backend
        if kind == "json":
            backend = _TokenizersBackend(source, data)
        else:
            backend = _SentencePieceBackend(source, data)
        return cls(backend, source, data, extra)

    # -- ids -------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids, the five special tokens included (``mask_id + 1``)."""
        return self._backend.vocab_size

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def mask_id(self) -> int:
        """Id of ``<mask>``: always the last id."""
        return self._backend.vocab_size - 1

    @property
    def special_ids(self) -> frozenset[int]:
        """The ids of ``<s>``, ``<pad>``, ``</s>``, ``<unk>`` and ``<mask>``."""
        return frozenset((self.bos_id, self.pad_id, self.eos_id, self.unk_id, self.mask_id))

    @property
    def backend(self) -> str:
        """``"tokenizers"`` or ``"sentencepiece"``: which file format the ids come from."""
        return self._backend.name

    # -- identity --------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of the tokenizer file's bytes: equal fingerprints mean equal ids."""
        return self._fingerprint

    def identity(self) -> dict[str, Any]:
        """A small JSON-serialisable record to store next to data encoded with this tokenizer."""
        return {
            "fingerprint": self._fingerprint,
            "file": self._source.name,
            "backend": self.backend,
            "vocab_size": self.vocab_size,
        }

    def __repr__(self) -> str:
        return (
            f"Tokenizer(backend={self.backend!r}, vocab_size={self.vocab_size}, "
            f"source={str(self._source)!r}, fingerprint={self._fingerprint[:12]!r})"
        )

    # -- encoding --------------------------------------------------------------------------

    def _frame(self, pieces: list[int], add_special_tokens: bool, max_length: int | None) -> list[int]:
        """Truncate ``pieces`` to fit ``max_length`` and wrap them in ``<s> … </s>``."""
        room = max_length
        if add_special_tokens:
            if room is not None:
                room -= 2
            pieces = pieces[:room] if room is not None else pieces
            return [self.bos_id, *pieces, self.eos_id]
        return pieces[:room] if room is not None else pieces

    @staticmethod
    def _check_max_length(max_length: int | None, add_special_tokens: bool) -> None:
        if max_length is None:
            return
        smallest = 2 if add_special_tokens else 1
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < smallest:
            raise TokenizerError(
                f"max_length={max_length!r} is invalid; expected an integer >= {smallest}"
                + (" (room for <s> and </s>)" if add_special_tokens else "")
            )

    def encode(self, text: str, add_special_tokens: bool = True, max_length: int | None = None) -> list[int]:
        """Token ids of one text: ``[<s>, pieces…, </s>]``.

        With ``max_length`` the pieces are cut so the whole list (specials included) has at
        most ``max_length`` ids; ``</s>`` is always kept at the end.
        """
        if not isinstance(text, str):
            raise TokenizerError(f"encode() expected a str, got {type(text).__name__}")
        self._check_max_length(max_length, add_special_tokens)
        return self._frame(self._backend.encode_many([text])[0], add_special_tokens, max_length)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Piece ids of ``text`` without ``<s>``/``</s>`` and each piece's (start, end)
        character span in ``text`` (what extractive QA needs to map answers to tokens).

        The ids equal ``encode(text, add_special_tokens=False)``. Only tokenizer.json models
        give offsets; a SentencePiece model raises TokenizerError.
        """
        return self._backend.encode_with_offsets(text)

    def encode_batch(
        self, texts: Sequence[str], add_special_tokens: bool = True, max_length: int | None = None
    ) -> list[list[int]]:
        """:meth:`encode` for many texts at once (in parallel in the backend library)."""
        texts = list(texts)
        if not set(map(type, texts)) <= {str}:  # one C-level pass; find the culprit only on failure
            for index, text in enumerate(texts):
                if not isinstance(text, str):
                    raise TokenizerError(
                        f"encode_batch() item {index} is a {type(text).__name__}, expected a str"
                    )
        self._check_max_length(max_length, add_special_tokens)
        if not texts:
            return []
        pieces = self._backend.encode_many(texts)
        if not add_special_tokens and max_length is None:
            return pieces  # nothing to frame: skip a Python call per text
        return [self._frame(p, add_special_tokens, max_length) for p in pieces]

    def pad(
        self, batch_ids: Sequence[Sequence[int]], pad_to_multiple_of: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pad id lists into ``(input_ids, attention_mask)``, both ``LongTensor (B, T)``.

        ``T`` is the longest list, rounded up to a multiple of ``pad_to_multiple_of`` if
        given (tensor cores prefer multiples of 8). The mask is 1 on real tokens, 0 on pads.
        """
        if pad_to_multiple_of is not None and (
            isinstance(pad_to_multiple_of, bool)
            or not isinstance(pad_to_multiple_of, int)
            or pad_to_multiple_of < 1
        ):
            raise TokenizerError(
                f"pad_to_multiple_of={pad_to_multiple_of!r} is invalid; expected a positive integer"
            )
        # torch is imported here, where tensors are made: tokenizing text (``infoxlm prepare``,
        # ``infoxlm tokenizer``) never needs it, nor its seconds of start-up.
        import torch

        lengths = [len(ids) for ids in batch_ids]
        width = max(lengths, default=0)
        if pad_to_multiple_of:
            width = math.ceil(width / pad_to_multiple_of) * pad_to_multiple_of
        input_ids = torch.full((len(lengths), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(lengths), width), dtype=torch.long)
        for row, (ids, length) in enumerate(zip(batch_ids, lengths)):
            if length:
                input_ids[row, :length] = torch.as_tensor(list(ids), dtype=torch.long)
                attention_mask[row, :length] = 1
        return input_ids, attention_mask

    def __call__(
        self,
        texts: str | Sequence[str],
        max_length: int | None = MODEL_MAX_LENGTH,
        pad_to_multiple_of: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """Encode and pad a batch: ``{"input_ids": (B, T), "attention_mask": (B, T)}``.

        A single string is treated as a batch of one. Sequences longer than ``max_length``
        (default 512, XLM-R's limit) are truncated.
        """
        if isinstance(texts, str):
            texts = [texts]
        input_ids, attention_mask = self.pad(
            self.encode_batch(texts, max_length=max_length), pad_to_multiple_of
        )
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def decode(self, ids: Iterable[int] | torch.Tensor, skip_special_tokens: bool = True) -> str:
        """Text of a list (or 1-D tensor) of ids; specials are dropped unless asked for."""
        if hasattr(ids, "tolist"):  # a tensor (or NumPy array)
            ids = ids.tolist()
        ids = [operator.index(i) for i in ids]
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise TokenizerError(
                    f"id {i} is outside the vocabulary; expected 0 <= id < {self.vocab_size}"
                )
        return self._backend.decode(ids, skip_special_tokens)

    # -- saving ----------------------------------------------------------------------------

    def save_pretrained(self, path: PathLike) -> list[Path]:
        """Write the tokenizer file(s) plus ``transformers`` configs into directory ``path``.

        The files are copied byte for byte (so the fingerprint survives); the configs make
        ``transformers.AutoTokenizer.from_pretrained(path)`` load an ``XLMRobertaTokenizer``
        with the same ids. Returns the paths written.
        """
        out = Path(path)
        if out.exists() and not out.is_dir():
            raise TokenizerError(
                f"{out}: exists and is not a directory; expected a directory to save the tokenizer in"
            )
        out.mkdir(parents=True, exist_ok=True)
        written = []
        canonical = TOKENIZER_JSON if self.backend == "tokenizers" else SENTENCEPIECE_MODEL
        target = out / canonical
        if not (target.exists() and target.resolve() == self._source.resolve()):
            target.write_bytes(self._data)
        written.append(target)
        for extra in self._extra_files:
            extra_target = out / extra.name
            if not (extra_target.exists() and extra_target.resolve() == extra.resolve()):
                shutil.copyfile(extra, extra_target)
            written.append(extra_target)

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
            for token, i in {**SPECIAL_IDS, MASK: self.mask_id}.items()
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
        for name, content in ((TOKENIZER_CONFIG, config), (SPECIAL_TOKENS_MAP, special_map)):
            (out / name).write_text(
                json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
            written.append(out / name)
        return written
