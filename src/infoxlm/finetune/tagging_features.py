"""Words with labels → token ids with labels on each word's first sub-token, and back.

XTREME's ``run_tag.py`` convention: every word is tokenized on its own (so it starts with
SentencePiece's "▁"); its label goes on its first sub-token, ``-100`` (ignored by the loss) on
the others and on ``<s>`` / ``</s>``; a word that yields no piece becomes ``<unk>``. A sentence
longer than ``max_length`` tokens is cut into consecutive pieces of whole words, as XTREME's
preprocessing cuts its files, so every word gets a prediction.

    >>> chunk_words([3, 1, 2, 5], room=6)
    [(0, 3), (3, 4)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from tqdm.auto import tqdm

from ..eval.tagging_data import TaggedSentence
from ..tokenizer import Tokenizer

IGNORE = -100  # the label of sub-tokens after a word's first, and of special tokens


@dataclass(frozen=True)
class TagFeature:
    """One model input: a sentence's words [start, stop) as token ids and per-token labels."""

    sentence: int  # index of the sentence in its split
    input_ids: list[int]
    labels: list[int]  # IGNORE except at first sub-tokens
    first: list[int]  # the position of each word's first sub-token, in word order


def chunk_words(piece_counts: Sequence[int], room: int) -> list[tuple[int, int]]:
    """[start, stop) word ranges of at most ``room`` pieces each (a longer word alone, cut)."""
    chunks, start, used = [], 0, 0
    for i, n in enumerate(piece_counts):
        if used and used + n > room:
            chunks.append((start, i))
            start, used = i, 0
        used += n
    chunks.append((start, len(piece_counts)))
    return chunks


def encode_sentences(
    tokenizer: Tokenizer, sentences: Sequence[TaggedSentence], label_ids: dict[str, int], max_length: int
) -> list[TagFeature]:
    """The features of ``sentences`` (see the module's docstring); ``label_ids`` maps labels to classes."""
    room = max_length - 2  # <s> … </s>
    vocabulary = sorted({w for s in sentences for w in s.words})
    pieces = dict(zip(vocabulary, tokenizer.encode_batch(vocabulary, add_special_tokens=False)))
    features = []
    for index, sentence in enumerate(sentences):
        word_pieces = [pieces[w] or [tokenizer.unk_id] for w in sentence.words]
        for start, stop in chunk_words([len(p) for p in word_pieces], room):
            ids, labels, first = [tokenizer.bos_id], [IGNORE], []
            for word, label in zip(word_pieces[start:stop], sentence.labels[start:stop]):
                word = word[:room - len(ids) + 1]  # only a word longer than the room alone is cut
                first.append(len(ids))
                ids += word
                labels += [label_ids[label]] + [IGNORE] * (len(word) - 1)
            features.append(TagFeature(index, ids + [tokenizer.eos_id], labels + [IGNORE], first))
    return features


def make_collate(tokenizer: Tokenizer) -> Callable[[list[TagFeature]], dict[str, torch.Tensor]]:
    def collate(items: list[TagFeature]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = tokenizer.pad([x.input_ids for x in items])  # (B, T) each
        labels = torch.full_like(input_ids, IGNORE)  # (B, T)
        for row, x in enumerate(items):
            labels[row, :len(x.labels)] = torch.tensor(x.labels)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    return collate


def tagging_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(batch["input_ids"], batch["attention_mask"])  # (B, T, num_labels)
    return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE)


@torch.no_grad()
def predict_labels(
    model: torch.nn.Module,
    features: Sequence[TagFeature],
    n_sentences: int,
    collate: Callable,
    labels: Sequence[str],
    *,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    progress: bool = True,
    desc: str = "predicting",
) -> list[list[str]]:
    """The predicted label of every word, per sentence (pieces of a cut sentence joined again)."""
    was_training = model.training
    model.eval()
    device = torch.device(device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    by_feature: dict[int, list[str]] = {}
    order = sorted(range(len(features)), key=lambda i: len(features[i].input_ids))  # little padding
    for start in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch", disable=not progress, leave=False):
        chosen = order[start:start + batch_size]
        batch = collate([features[i] for i in chosen])
        with autocast:
            logits = model(batch["input_ids"].to(device), batch["attention_mask"].to(device))  # (B, T, L)
        best = logits.argmax(-1).cpu()  # (B, T)
        for row, i in enumerate(chosen):
            by_feature[i] = [labels[int(best[row, p])] for p in features[i].first]
    model.train(was_training)
    out: list[list[str]] = [[] for _ in range(n_sentences)]
    for i, feature in enumerate(features):  # features are in sentence order, pieces in word order
        out[feature.sentence] += by_feature[i]
    return out
