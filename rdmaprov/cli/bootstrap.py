"""`rdmaprov bootstrap INVENTORY`: provision new nodes with playbooks/site.yml."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rdmaprov import inventory as inventory_mod
from rdmaprov import progress
from rdmaprov.cli import options
from rdmaprov.engine import RunnerSession, RunResult
from rdmaprov.resources import playbook as find_playbook


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "bootstrap",
        help="provision nodes: drivers, modules, MTU, QoS, firewall, container runtime",
        description="Validate the inventory and its variables (no host is touched when they "
        "are wrong), then run the rdmaprov.cluster site playbook with live per-host progress "
        "and a per-host summary.",
        epilog=options.EXIT_CODES_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inventory", type=Path, help="inventory file or directory (INI or YAML)")
    options.add_run_options(parser)
    parser.set_defaults(func=run)


def exit_code(result: RunResult) -> int:
    if result.ok:
        return 0
    return 2 if result.failed_hosts else 1


def run(args: argparse.Namespace, playbook: Path | None = None) -> int:
    """``playbook`` replaces site.yml (tests run fixture playbooks through the full path)."""
    options.check_choices(args)
    options.forks(args)
    options.apply_retry(args)
    inv = inventory_mod.load(args.inventory, limit=args.limit, extra_vars=args.extra_vars)
    book = playbook or find_playbook("site.yml")
    spec = options.run_spec(args, book, inv)
    human = sys.stderr if args.json else sys.stdout
    with progress.Progress(human, hosts=inv.selected) as view:
        result = RunnerSession(spec, on_event=view).run()
    code = exit_code(result)
    progress.print_reports(view.state.reports, human)
    progress.print_summary(result, human)
    if not args.check:
        retry = options.record_retry(args.inventory, list(result.hosts), result.failed_hosts)
        if retry is not None:
            print(f"retry the failed hosts: --retry-failed (or --limit @{retry})", file=human)
    if args.json:
        progress.print_json(result, code, sys.stdout, view.state.reports)
    elif code == 1 and result.error:
        print(f"rdmaprov: error: {result.error}", file=sys.stderr)
    return code
