"""The ``infoxlm`` command.

Each subcommand lives in :mod:`infoxlm.commands` (``commands/pretrain.py`` is ``infoxlm pretrain``)
and registers itself here; only commands that work are listed. Errors caused by the user's input (``InfoXLMError``) and failures of the file
system (``OSError``: a missing file, no permission, no space left) are printed on one line and
exit with status 1, never as a traceback; this function is the one place that does it for every
command. A reader that closes the pipe early (``infoxlm prepare inspect --json | head``) ends
the command quietly with status 141, as Unix tools end.

Building the parsers imports no torch (nor anything that does): each command's handler imports
its implementation when it runs. torch takes seconds to import, torch._dynamo seconds more, and
``--version``, every ``--help`` and a mistyped argument should answer at once.
tests/test_cli.py checks which modules they import.
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import sys

from .version import __version__
from .cli_args import OneLineParser
from .commands.bench import add_bench_command
from .commands.demo import add_demo_command
from .commands.embed import add_embed_command
from .commands.eval import add_eval_commands
from .commands.finetune import add_finetune_commands
from .commands.mine import add_mine_command
from .commands.prepare import add_prepare_commands
from .commands.prepare_show import add_show_command
from .commands.pretrain import add_pretrain_commands
from .commands.report import add_report_command
from .commands.tokenizer import add_tokenizer_commands
from .errors import InfoXLMError


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="infoxlm",
        description="Cross-lingual language-model pre-training (InfoXLM) on an XLM-R-compatible encoder.",
    )
    parser.add_argument("--version", action="version", version=f"infoxlm {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    add_tokenizer_commands(commands)
    add_show_command(add_prepare_commands(commands))
    add_pretrain_commands(commands)
    add_eval_commands(commands)
    add_mine_command(commands)
    add_finetune_commands(commands)
    add_report_command(commands)
    add_embed_command(commands)
    add_bench_command(commands)
    add_demo_command(commands)
    return parser


def describe_os_error(err: OSError) -> str:
    """One line for a failed file-system call: what failed, and on which path.

    >>> describe_os_error(OSError(errno.ENOSPC, "No space left on device", "store/mono/de"))
    'no space left on device while writing store/mono/de'
    >>> describe_os_error(FileNotFoundError(errno.ENOENT, "No such file or directory", "x.txt"))
    'x.txt: no such file or directory'
    """
    paths = [p for p in (err.filename, err.filename2) if p is not None]
    where = " → ".join(os.fsdecode(p) for p in paths)
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on device while writing {where}" if where else "no space left on device"
    reason = (err.strerror or str(err) or type(err).__name__).rstrip(".")
    reason = reason[:1].lower() + reason[1:]
    return f"{where}: {reason}" if where else reason


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        status = args.func(args)
        sys.stdout.flush()  # a reader that left shows here, not in the interpreter's exit
        return status
    except BrokenPipeError as err:
        if not stdout_reader_left():
            print(f"infoxlm: error: {describe_os_error(err)}", file=sys.stderr)
            return 1
        return end_quietly_on_closed_pipe()
    except InfoXLMError as err:
        print(f"infoxlm: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"infoxlm: error: {describe_os_error(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("infoxlm: interrupted", file=sys.stderr)
        return 130


SIGPIPE_STATUS = 128 + 13  # what a shell reports for a tool killed by SIGPIPE (`yes | head`)


def stdout_reader_left() -> bool:
    """Whether standard output is a pipe whose reading end is closed (``infoxlm … | head``
    after head has exited): poll reports POLLERR on the writing end of such a pipe."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # POLLERR is reported whatever the mask
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, ValueError, OSError):  # no poll (Windows), stdout closed or replaced
        return True


def end_quietly_on_closed_pipe() -> int:
    """End as Unix tools do when their reader has gone: no message, status 141. Standard
    output is pointed at /dev/null first, so that the interpreter's own flush at exit does not
    fail again and print "Exception ignored … BrokenPipeError" (as the Python docs advise)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, ValueError, OSError):
        pass
    return SIGPIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
