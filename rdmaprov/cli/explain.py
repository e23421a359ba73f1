"""`rdmaprov explain [FILE ...]`: what NCCL logs and RDMA tool output say, offline."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from rdmaprov.errors import UserError
from rdmaprov.explain import KNOWN_FORMATS, Options, explain_stream, parse_line_rate, render_text
from rdmaprov.validate.verdict import DEFAULT_BW_FRACTION


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain", help="explain an NCCL log, nccl-tests output or RDMA tool output (offline)",
        description="Reads each FILE (stdin when none or '-'), detects what it is ("
        + ", ".join(KNOWN_FORMATS) + ") and says what it shows, what is wrong and what to "
        "do. Exit 0: nothing wrong; 2: an error was found; 1: unreadable or unknown input.")
    p.add_argument("files", nargs="*", metavar="FILE", help="input files ('-' = stdin)")
    p.add_argument("--json", action="store_true",
                   default=os.environ.get("RDMAPROV_EXPLAIN_JSON") == "1",
                   help="one JSON document per input, a list when several "
                   "(env RDMAPROV_EXPLAIN_JSON=1)")
    p.add_argument("--expect-busbw", type=float, metavar="GBPS",
                   default=os.environ.get("RDMAPROV_EXPECT_BUSBW") or None,
                   help="nccl-tests verdict: pass when peak busbw >= GBPS GB/s "
                   "(env RDMAPROV_EXPECT_BUSBW)")
    p.add_argument("--line-rate", metavar="RATE", default=os.environ.get("RDMAPROV_LINE_RATE"),
                   help="nccl-tests verdict from a NIC rate such as 400G: pass when peak busbw "
                   ">= fraction x NICs x rate/8 (env RDMAPROV_LINE_RATE)")
    # Their environment defaults are read in run(), through the same `type`: a bad one is one
    # line (exit 1), never a traceback; a flag given without --line-rate is refused.
    p.add_argument("--nics", type=int,
                   help="NICs per host for --line-rate (env RDMAPROV_NICS; default 1)")
    p.add_argument("--min-fraction", type=float,
                   help="fraction of line rate to expect (env RDMAPROV_MIN_FRACTION; default "
                   f"{DEFAULT_BW_FRACTION:g}, validate's --bw-fraction; published NCCL health "
                   "checks use 0.72-0.8)")
    p.add_argument("--ib-tc", type=int, metavar="TC", default=_env_int("NCCL_IB_TC"),
                   help="mlnx_qos: NCCL_IB_TC to check for lossless delivery "
                   "(env NCCL_IB_TC; default: NCCL's default 0)")
    p.set_defaults(func=run)


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    return int(v) if v and v.isdecimal() else None


def _lines(path: str) -> Iterator[str]:
    if path == "-":
        stream = sys.stdin
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
        yield from stream
        return
    try:
        # Universal newlines turn CRLF pastes into plain lines; bad bytes must not stop a read.
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from fh
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None


def _line_rate_flags(args: argparse.Namespace) -> None:
    """--nics and --min-fraction scale --line-rate: given without it they would be dropped, so
    they are refused; not given, they take RDMAPROV_NICS / RDMAPROV_MIN_FRACTION or the
    default."""
    unused = [f"{flag}: it scales --line-rate, which is not given" for flag, value in
              (("--nics", args.nics), ("--min-fraction", args.min_fraction))
              if value is not None and not args.line_rate]
    if unused:
        raise UserError("\n".join(unused))
    for dest, env, kind, default in (("nics", "RDMAPROV_NICS", int, 1),
                                     ("min_fraction", "RDMAPROV_MIN_FRACTION", float,
                                      DEFAULT_BW_FRACTION)):
        if getattr(args, dest) is None:
            raw = os.environ.get(env)
            try:
                setattr(args, dest, kind(raw) if raw else default)
            except ValueError:
                raise UserError(f"{env}: {raw!r} is not a number") from None


def run(args: argparse.Namespace) -> int:
    _line_rate_flags(args)
    rate = None
    if args.line_rate:
        try:
            rate = parse_line_rate(args.line_rate)
        except ValueError:
            raise UserError(f"--line-rate {args.line_rate!r}: give a rate like 400G") from None
    if args.nics < 1:
        raise UserError("--nics must be at least 1")
    if not 0 < args.min_fraction <= 1:
        raise UserError("--min-fraction must be in (0, 1]")
    if args.ib_tc is not None and not 0 <= args.ib_tc <= 255:
        raise UserError("--ib-tc must be 0..255")
    opts = Options(expect_busbw=args.expect_busbw, line_rate_gbps=rate, nics=args.nics,
                   min_fraction=args.min_fraction, ib_tc=args.ib_tc)
    files = args.files or ["-"]
    reports: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        reports.append((path if path != "-" else "<stdin>", explain_stream(_lines(path), opts)))
    if args.json:
        docs = [r for _, r in reports]
        json.dump(docs[0] if len(docs) == 1 else docs, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        text = "\n\n".join(render_text(name, r) for name, r in reports)
        _print(text)
    if any(r["kind"] == "unknown" for _, r in reports):
        if not args.json:
            print("rdmaprov: error: cannot tell what the input is; known formats: "
                  + ", ".join(KNOWN_FORMATS), file=sys.stderr)
        return 1
    if any(f["severity"] == "error" for _, r in reports for f in r["findings"]):
        return 2
    return 0


def _print(text: str) -> None:
    if sys.stdout.isatty():
        try:
            from rich.console import Console
            from rich.markup import escape
            styled = []
            for line in text.splitlines():
                s = escape(line)
                if line.lstrip().startswith("ERROR"):
                    s = f"[bold red]{s}[/]"
                elif line.lstrip().startswith("WARN"):
                    s = f"[yellow]{s}[/]"
                elif line.startswith("=="):
                    s = f"[bold]{s}[/]"
                styled.append(s)
            Console(highlight=False).print("\n".join(styled))
            return
        except ImportError:  # rich is a dependency, but plain text must always work
            pass
    print(text)
