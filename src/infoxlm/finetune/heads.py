"""Task heads on the encoder, with the key names of Hugging Face's XLM-R task models.

``SequenceClassifier`` is ``XLMRobertaForSequenceClassification``, ``SpanExtractor``
``XLMRobertaForQuestionAnswering`` and ``TokenClassifier`` ``XLMRobertaForTokenClassification``,
weight for weight: the body under ``roberta.`` (no pooler, as
those classes build it with ``add_pooling_layer=False``), the head under ``classifier.dense`` /
``classifier.out_proj``, ``qa_outputs`` or ``classifier``. :func:`save_task_model` writes a directory that
``transformers`` loads with no missing keys, so a fine-tuned model leaves this project as a
standard checkpoint.

Example::

    >>> from infoxlm import Encoder, EncoderConfig
    >>> model = SequenceClassifier(Encoder(EncoderConfig.of_size("tiny", vocab_size=100)), num_labels=3)
    >>> import torch; model(torch.tensor([[0, 5, 2]]), torch.tensor([[1, 1, 1]])).shape
    torch.Size([1, 3])
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

import torch
from safetensors.torch import save_file
from torch import nn

from ..export.task_card import write_task_card
from ..model.encoder import Encoder
from ..model.hub import BODY_PREFIX
from ..model.packing import Packing
from ..outputs import atomic_dir

if TYPE_CHECKING:
    from ..tokenizer import Tokenizer

# Encoder parts the task models neither use nor save: the MLM head (its decoder is the tied
# word-embedding matrix) and the pooler (absent from HF's task classes).
_UNUSED_PARTS = ("lm_head.", "pooler.")


class ClassificationHead(nn.Module):
    """RoBERTa's classification head on the ``<s>`` state: dropout → dense → tanh → dropout → out_proj.

    <s> states (B, d) → logits (B, num_labels). Same layer names and order as Hugging Face's
    ``XLMRobertaClassificationHead``, so its weights load there unchanged.
    """

    def __init__(self, hidden_size: int, num_labels: int, dropout: float):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(hidden_size, num_labels)

    def forward(self, first: torch.Tensor) -> torch.Tensor:
        x = self.dropout(first)  # (B, d): the <s> token's final state
        x = torch.tanh(self.dense(x))
        return self.out_proj(self.dropout(x))  # (B, num_labels)


class TaskModel(nn.Module):
    """An encoder under ``roberta`` plus a task head; the shared plumbing of both tasks."""

    roberta: Encoder

    def trainable_parameters(self) -> Iterator[nn.Parameter]:
        """Body + head, without the unused MLM head and pooler (they get no gradient)."""
        for name, p in self.named_parameters():
            if not name.startswith(tuple(BODY_PREFIX + part for part in _UNUSED_PARTS)):
                yield p

    def task_state_dict(self) -> dict[str, torch.Tensor]:
        """The tensors Hugging Face's task class holds, under its names (CPU, contiguous)."""
        out = {}
        for key, tensor in self.state_dict().items():
            if key.startswith(tuple(BODY_PREFIX + part for part in _UNUSED_PARTS)):
                continue
            out[key] = tensor.detach().to("cpu").contiguous()
        return out

    def _init_head(self, module: nn.Module) -> None:
        # Hugging Face's XLM-R initialisation for new layers: N(0, initializer_range²), zero bias.
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                nn.init.normal_(layer.weight, std=self.roberta.config.initializer_range)
                nn.init.zeros_(layer.bias)


class SequenceClassifier(TaskModel):
    """Sentence(-pair) classification: ``XLMRobertaForSequenceClassification``'s layout.

    forward(input_ids (B, T), attention_mask (B, T)) → logits (B, num_labels).
    """

    architecture = "XLMRobertaForSequenceClassification"

    def __init__(self, encoder: Encoder, num_labels: int, dropout: float | None = None):
        super().__init__()
        self.roberta = encoder
        # HF uses classifier_dropout if set, else hidden_dropout_prob (0.1 for XLM-R).
        p = encoder.config.hidden_dropout_prob if dropout is None else dropout
        self.classifier = ClassificationHead(encoder.config.hidden_size, num_labels, p)
        self._init_head(self.classifier)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # The head reads <s> only, so the top layer runs its row-wise part there only.
        packing = Packing.of(attention_mask)
        first = self.roberta.states_at(input_ids, packing.first_rows, attention_mask, packing=packing)  # (B, d)
        return self.classifier(first)


class SpanExtractor(TaskModel):
    """Extractive QA: ``XLMRobertaForQuestionAnswering``'s layout, one linear d → 2 on every token.

    forward(input_ids (B, T), attention_mask (B, T)) → (start_logits (B, T), end_logits (B, T)).
    """

    architecture = "XLMRobertaForQuestionAnswering"

    def __init__(self, encoder: Encoder):
        super().__init__()
        self.roberta = encoder
        self.qa_outputs = nn.Linear(encoder.config.hidden_size, 2)
        self._init_head(self.qa_outputs)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.qa_outputs(self.roberta(input_ids, attention_mask).last_hidden_state)  # (B, T, 2)
        start, end = logits.unbind(dim=-1)
        return start, end



class TokenClassifier(TaskModel):
    """Token classification (NER, POS): ``XLMRobertaForTokenClassification``'s layout, dropout
    then one linear d → num_labels on every token.

    forward(input_ids (B, T), attention_mask (B, T)) → logits (B, T, num_labels).
    """

    architecture = "XLMRobertaForTokenClassification"

    def __init__(self, encoder: Encoder, num_labels: int, dropout: float | None = None):
        super().__init__()
        self.roberta = encoder
        self.dropout = nn.Dropout(encoder.config.hidden_dropout_prob if dropout is None else dropout)
        self.classifier = nn.Linear(encoder.config.hidden_size, num_labels)
        self._init_head(self.classifier)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        states = self.roberta(input_ids, attention_mask).last_hidden_state  # (B, T, d)
        return self.classifier(self.dropout(states))  # (B, T, num_labels)


def save_task_model(
    model: TaskModel,
    directory: str | Path,
    tokenizer: "Tokenizer | None" = None,
    *,
    labels: Sequence[str] | None = None,
    state_dict: dict[str, torch.Tensor] | None = None,
    source: str | Path | None = None,
) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (+ tokenizer) for the model's HF task class,
    and with ``source`` (the model it was fine-tuned from) its model card.

    ``state_dict`` (default: the model's current weights, as :meth:`TaskModel.task_state_dict`
    gives them) lets a caller save a best checkpoint kept aside; ``labels`` names the classes
    (``id2label``) of a classifier.
    """
    directory = Path(directory)
    tensors = state_dict if state_dict is not None else model.task_state_dict()
    config = model.roberta.config.to_hf_dict(model.architecture)
    if labels is not None:
        config["id2label"] = {str(i): name for i, name in enumerate(labels)}
        config["label2id"] = {name: i for i, name in enumerate(labels)}
        config["problem_type"] = "single_label_classification"
    with atomic_dir(directory, replace=True) as tmp:  # the model complete, or none (an earlier one kept)
        save_file({k: v.contiguous() for k, v in tensors.items()}, tmp / "model.safetensors", metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if source is not None:
            write_task_card(tmp, model.architecture, source, labels, name=directory.name)
    return directory
