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


def file_error(path: object, exc: OSError | UnicodeDecodeError, expected: str, error: type[InfoXLMError] = InfoXLMError) -> InfoXLMError:
    """The one-line ``error`` for a file that cannot be opened or is not UTF-8: ``path``, what
    went wrong, and ``expected`` (what the file should be, "a UTF-8 text file"). Every reader of
    user files raises it, ``from None`` (the message says all the traceback would)::

        >>> print(file_error("x.tsv", FileNotFoundError(2, "No such file or directory"), "an XNLI .tsv file"))
        x.tsv: no such file; expected an XNLI .tsv file
        >>> print(file_error("d", IsADirectoryError(21, "Is a directory"), "a JSON file"))
        d: is a directory; expected a JSON file
    """
    if isinstance(exc, UnicodeDecodeError):
        problem = f"not UTF-8 (byte {exc.start})"
    elif isinstance(exc, FileNotFoundError):
        problem = "no such file"
    elif isinstance(exc, IsADirectoryError):
        problem = "is a directory"
    else:  # no permission, an unreadable device, …
        problem = f"cannot open ({exc.strerror or exc})"
    return error(f"{path}: {problem}; expected {expected}")
