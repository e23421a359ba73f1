"""The ``rdmaprov`` command: one module per sub-command.

Each module in COMMANDS defines ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed namespace and returning the exit code.

Exit codes: 0 all good; 1 usage or input error (one line on stderr, no host contacted);
2 some host failed or was unreachable (or, for checks, the thing checked is unhealthy).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rdmaprov import __version__
from rdmaprov.errors import UserError

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rdmaprov",
        description="Provision and prove RDMA (InfiniBand / RoCEv2) GPU clusters.",
    )
    parser.add_argument("--version", action="version", version=f"rdmaprov {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"rdmaprov.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as exc:
        print(f"rdmaprov: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("rdmaprov: interrupted", file=sys.stderr)
        return 130
