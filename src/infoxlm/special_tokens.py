"""The special tokens of the XLM-R vocabulary layout that every infoxlm tokenizer has.

Ids 0-3 are ``<s> <pad> </s> <unk>`` (fairseq's dictionary order), ordinary pieces follow
from id 4, and ``<mask>`` is the last id. The tokenizer checks a loaded vocabulary against
this; the data pipeline writes and masks ids by it.

>>> SPECIAL_IDS[EOS], FIRST_ORDINARY_ID
(2, 4)
"""

from __future__ import annotations

__all__ = ["BOS", "PAD", "EOS", "UNK", "MASK", "BOS_ID", "PAD_ID", "EOS_ID", "UNK_ID", "FIRST_ORDINARY_ID", "SPECIAL_IDS"]

BOS, PAD, EOS, UNK, MASK = "<s>", "<pad>", "</s>", "<unk>", "<mask>"
BOS_ID, PAD_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
FIRST_ORDINARY_ID = 4
# The four that sit at fixed ids in front of the vocabulary; <mask>'s id is vocab_size - 1.
SPECIAL_IDS = {BOS: BOS_ID, PAD: PAD_ID, EOS: EOS_ID, UNK: UNK_ID}
