"""The ``README.md`` of a fine-tuned model (``infoxlm finetune``), in the Hugging Face
model-card format: what task head it carries, the model it was fine-tuned from, its labels
and how to load it. The pre-trained model's own card (model_card.py) says how that was made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..version import __version__
from .model_card import CARD_NAME, front_matter, hub_id, source_languages

__all__ = ["write_task_card"]

# The task head's Hugging Face class → (pipeline tag, the Auto class that loads it, the task in words).
TASKS = {
    "XLMRobertaForSequenceClassification": ("text-classification", "AutoModelForSequenceClassification",
                                            "sentence(-pair) classification"),
    "XLMRobertaForTokenClassification": ("token-classification", "AutoModelForTokenClassification", "token tagging"),
    "XLMRobertaForQuestionAnswering": ("question-answering", "AutoModelForQuestionAnswering", "extractive question answering"),
}  # fmt: skip


def write_task_card(directory: str | Path, architecture: str, source: str | Path, labels: Sequence[str] | None = None,
                    name: str | None = None) -> Path:
    """Write ``directory/README.md`` for a ``architecture`` model fine-tuned from ``source``
    (the model directory ``infoxlm finetune --model`` read); ``labels``: its classes; ``name``
    (default: the directory's) is the name the card loads the model by."""
    pipeline_tag, auto_class, task = TASKS[architecture]
    name = name or Path(directory).name
    tags = ["xlm-roberta", "infoxlm", "cross-lingual", pipeline_tag]
    # The pre-trained model's languages, where its card says; its name where it is a Hub id.
    front = front_matter(source_languages(source), "unknown", "transformers", pipeline_tag, tags, hub_id(str(source)))
    body = [
        f"# {name}", "",
        f"An XLM-R-style encoder with a {task} head, fine-tuned by infoxlm {__version__} from `{source}`.", "",
        "## Use", "", "```python",
        f"from transformers import AutoTokenizer, {auto_class}, pipeline",
        f'model = {auto_class}.from_pretrained("{name}")',
        f'tokenizer = AutoTokenizer.from_pretrained("{name}")',
        f'predict = pipeline("{pipeline_tag}", model=model, tokenizer=tokenizer)',
        "```", "",
    ]  # fmt: skip
    if labels:
        body += ["## Labels", "", ", ".join(f"`{label}`" for label in labels), ""]
    path = Path(directory) / CARD_NAME
    path.write_text("\n".join(front) + "\n\n" + "\n".join(body).rstrip() + "\n", encoding="utf-8")
    return path
