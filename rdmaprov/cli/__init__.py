"""The ``rdmaprov`` command: one module per sub-command.

Each module in COMMANDS defines ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed namespace and returning the exit code. Only the module
of the command being run is imported (``rdmaprov check`` on a node must start fast and must not
pull in Ansible); ``rdmaprov --help`` and an unknown command import them all.

Exit codes: 0 all good; 1 usage or input error (one line per problem on stderr, no host contacted);
2 some host failed or was unreachable (or, for checks, the thing checked is unhealthy).
argparse's own exit 2 for a bad flag is turned into 1: a typo is not an unhealthy node.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import NoReturn

from rdmaprov import __version__
from rdmaprov.closedpipe import quiet_stdout
from rdmaprov.errors import UserError
from rdmaprov.textsafe import safe_line

EXIT_OK = 0
EXIT_INPUT = 1
EXIT_HOSTS = 2

# Add a command by adding its module name here.
COMMANDS = (
    "bootstrap",
    "check",
    "explain",
    "lab",
    "probe",
    "reconfigure",
    "status",
    "validate",
)


class UsageError(Exception):
    """A bad command line, as argparse words it; `main` makes it one line and exit 1."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse, except that a usage error raises instead of exiting 2 (sub-parsers made by
    add_subparsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line (its first word that is one), if any."""
    return next((a for a in argv if a in COMMANDS), None)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that sub-command's (and only its module imported)."""
    parser = Parser(
        prog="rdmaprov",
        description="Provision and prove RDMA (InfiniBand / RoCEv2) GPU clusters.",
    )
    parser.add_argument("--version", action="version", version=f"rdmaprov {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in (only,) if only in COMMANDS else COMMANDS:
        importlib.import_module(f"rdmaprov.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # A reader that goes away (`| head -1`, `| true`) ends nothing: the command finishes and
    # its exit code is its own (check's 0/2 stays a verdict, never 1 "config error").
    with quiet_stdout(), _term_as_interrupt():
        return _main(argv)


@contextlib.contextmanager
def _term_as_interrupt() -> Iterator[None]:
    """SIGTERM (systemd, a scheduler, `kill`) stops a run the way Ctrl-C does: Ansible's
    processes are stopped and waited for (rdmaprov.engine), never left behind."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted(exc: KeyboardInterrupt) -> None:
    """The line, then (a run's rdmaprov.engine.Interrupted) each host that had a task running."""
    print("rdmaprov: interrupted", file=sys.stderr)
    for host, task in sorted(getattr(exc, "in_flight", {}).items()):
        print(f"rdmaprov: {safe_line(host)}: interrupted in task {safe_line(task)!r}",
              file=sys.stderr)
    left = getattr(exc, "left", [])
    if left:
        print(f"rdmaprov: processes still running: {' '.join(map(str, left))}; their "
              f"files are kept in {getattr(exc, 'kept', None)}", file=sys.stderr)


def settle_inventory(args: argparse.Namespace) -> str | None:
    """``-i`` and the INVENTORY word into ``args.inventory`` (cli.options.add_inventory); a usage
    problem's text, or None. Here, not in options: `check` must not import the run machinery."""
    if not hasattr(args, "inventory_required"):
        return None  # a command without an inventory (check, explain, lab)
    flags = getattr(args, "inventory_flag", None) or []
    if len(flags) > 1:
        return ("-i/--inventory given more than once: rdmaprov takes one inventory source "
                "(a directory combines several)")
    if flags:
        if args.inventory is not None and args.inventory != flags[0]:
            return (f"two inventories: {args.inventory} and -i {flags[0]}; give one")
        args.inventory = flags[0]
    if args.inventory is None and getattr(args, "inventory_required", False):
        return "the following arguments are required: inventory (or -i INVENTORY)"
    return None


def _main(argv: list[str]) -> int:
    command = _command_of(argv)
    parser = build_parser(command)
    try:
        args, unknown = parser.parse_known_args(argv)
        prog = f"rdmaprov {command}" if command else "rdmaprov"
        if unknown:
            # argparse words a sub-command's unknown flag as the top parser's; the help that
            # lists the right flags is the sub-command's.
            raise UsageError(prog, f"unrecognized arguments: {' '.join(unknown)}")
        problem = settle_inventory(args)
        if problem:
            raise UsageError(prog, problem)
    except UsageError as exc:
        print(f"{exc.prog}: error: {safe_line(exc.message)} (see '{exc.prog} --help')",
              file=sys.stderr)
        if command is not None:
            hook = getattr(importlib.import_module(f"rdmaprov.cli.{command}"),
                           "on_usage_error", None)
            if hook is not None:
                hook(argv, exc.message)
        return EXIT_INPUT
    try:
        return int(args.func(args))
    except UserError as exc:
        for line in str(exc).splitlines() or [""]:  # every problem, one line each
            print(f"rdmaprov: error: {safe_line(line)}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt as exc:
        _interrupted(exc)
        return 130
