"""Errors a user can act on.

Every problem caused by the user's input (a file, a flag, a checkpoint) is raised as an
``InfoXLMError`` whose message names the file, the line or tensor, the value found and what
was expected. The command line prints that message on one line and exits non-zero; Python
callers get an ordinary exception (a ``ValueError`` subclass) they can catch.
"""


class InfoXLMError(ValueError):
    """A problem with the user's input, explained in one line."""


class CheckpointError(InfoXLMError):
    """A directory that is not a usable XLM-R-style checkpoint."""


class TokenizerError(InfoXLMError):
    """A tokenizer directory or tokenizer-training input that cannot be used."""


class DataError(InfoXLMError):
    """Input text, a language code or an option of data preparation that cannot be used."""


class EvalDataError(InfoXLMError):
    """Evaluation data (Tatoeba, XNLI, MLQA files) or predictions that are missing or malformed."""
