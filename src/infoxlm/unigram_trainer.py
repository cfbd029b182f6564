"""SentencePiece's Unigram trainer, its pieces written as a ``tokenizers`` model in XLM-R's layout.

:func:`train_unigram` is the last step of :func:`~infoxlm.tokenizer_training.train_tokenizer`:
the sample goes in as lines, a ``tokenizers.Tokenizer`` comes out with ``<s> <pad> </s> <unk>``
first, the pieces in a canonical order and ``<mask>`` last, and XLM-R's normaliser and
pre-tokenizer. SentencePiece's trainer skips every line longer than
:data:`SENTENCEPIECE_MAX_BYTES` without a word; the caller cuts them first.
"""

from __future__ import annotations

from collections.abc import Iterator

from infoxlm.errors import TokenizerError
from infoxlm.sentencepiece_charsmap import nmt_nfkc_charsmap
from infoxlm.special_tokens import BOS, BOS_ID, EOS, EOS_ID, MASK, UNK
from infoxlm.tokenizer_files import LEADING_SPECIALS, METASPACE

__all__ = ["SENTENCEPIECE_MAX_BYTES", "train_unigram"]

# SentencePiece's max_sentence_length (its default, passed explicitly): its trainer drops longer
# lines silently, so lines are cut into pieces of at most this many UTF-8 bytes before it sees them.
SENTENCEPIECE_MAX_BYTES = 4192


def train_unigram(lines: Iterator[str], vocab_size: int, threads: int, show_progress: bool):
    """Train a Unigram ``tokenizers.Tokenizer`` with XLM-R's pipeline and special-token ids.

    The pieces and scores come from SentencePiece's trainer (the one XLM-R's own vocabulary
    came from), which gives the same model for the same sample and thread count; the
    ``tokenizers`` trainer does not (hash-map order decides its ties, even on one thread).
    """
    return _xlmr_unigram_tokenizer(_sentencepiece_pieces(lines, vocab_size, threads, show_progress))


def _sentencepiece_pieces(
    lines: Iterator[str], vocab_size: int, threads: int, show_progress: bool
) -> list[tuple[str, float]]:
    """(piece, score) of every ordinary piece SentencePiece's Unigram trainer learns from ``lines``."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=lines,
            model_writer=model,
            model_type="unigram",
            # Its own <unk> plus the pieces; <s> <pad> </s> lead and <mask> follows (_xlmr_unigram_tokenizer).
            vocab_size=vocab_size - 4,
            hard_vocab_limit=False,  # tiny data: fewer pieces instead of an error
            character_coverage=1.0,  # every character of the sample gets a piece
            normalization_rule_name="nmt_nfkc",
            unk_id=0,
            bos_id=-1,
            eos_id=-1,
            pad_id=-1,
            input_sentence_size=0,  # the sample is drawn by language in _iter_sample
            max_sentence_length=SENTENCEPIECE_MAX_BYTES,  # the caller cut longer lines
            shuffle_input_sentence=False,
            num_threads=threads,
            minloglevel=0 if show_progress else 2,
        )
    except RuntimeError as exc:
        if "required_chars" in str(exc):
            raise TokenizerError(
                f"vocab_size={vocab_size} cannot hold every distinct character of the training "
                "sample (a Unigram vocabulary keeps them all); expected a larger vocab_size"
            ) from None
        raise
    trained = spm.SentencePieceProcessor(model_proto=model.getvalue())
    return [
        (trained.id_to_piece(i), trained.get_score(i))
        for i in range(trained.get_piece_size())
        if not (trained.is_unknown(i) or trained.is_control(i))
    ]


def _xlmr_unigram_tokenizer(vocab: list[tuple[str, float]]):
    """A ``tokenizers.Tokenizer`` over ``vocab`` in XLM-R's layout: <s> <pad> </s> <unk> first,
    the pieces in a canonical order, <mask> last; XLM-R's normaliser and pre-tokenizer."""
    from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import Tokenizer as HFTokenizer

    normalizer = normalizers.Sequence(
        [normalizers.Precompiled(nmt_nfkc_charsmap()), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    # WhitespaceSplit + Metaspace("always") is exactly what transformers 5 rebuilds for an
    # XLM-R tokenizer, so transformers and this file tokenize identically.
    pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always"),
        ]
    )

    # A canonical order: scores rounded to 1e-6, ties by piece, so that the file's bytes
    # depend on the pieces and their scores only.
    head = [(piece, 0.0) for piece in LEADING_SPECIALS]
    tail = sorted(
        ((piece, round(score, 6)) for piece, score in vocab),
        key=lambda piece_score: (-piece_score[1], piece_score[0]),
    )
    final = HFTokenizer(models.Unigram(head + tail, unk_id=LEADING_SPECIALS.index(UNK), byte_fallback=False))
    final.normalizer = normalizer
    final.pre_tokenizer = pre_tokenizer
    final.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always")
    final.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LEADING_SPECIALS])
    final.add_special_tokens([AddedToken(MASK, special=True, normalized=False)])  # id = last
    # Only for users of the raw JSON (transformers); our encode() adds <s>/</s> itself.
    final.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}",
        pair=f"{BOS} $A {EOS} {EOS} $B {EOS}",
        special_tokens=[(BOS, BOS_ID), (EOS, EOS_ID)],
    )
    return final
