"""`rdmaprov bootstrap INVENTORY`: provision new nodes with playbooks/site.yml."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from rdmaprov import drift, outcome, progress
from rdmaprov import inventory as inventory_mod
from rdmaprov.cli import options
from rdmaprov.engine import RunnerSession, RunResult
from rdmaprov.errors import UserError
from rdmaprov.resources import playbook as find_playbook


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "bootstrap",
        help="provision nodes: drivers, modules, MTU, QoS, firewall, container runtime",
        description="Validate the inventory and its variables (no host is touched when they "
        "are wrong), then run the rdmaprov.cluster site playbook with live per-host progress "
        "and a per-host summary, then prove the hosts with `rdmaprov validate` (all_reduce "
        "across hosts: transport from NCCL's own log, busbw against the link rate) where "
        "site.yml changed something: a no-change re-run is not validated again unless "
        "--validate always. The validation is skipped with --no-validate, --check or --tags.",
        epilog=options.EXIT_CODES_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_inventory(parser)
    options.add_run_options(parser)
    options.add_quiet(parser)
    parser.add_argument("--validate", choices=VALIDATE_CHOICES,
                        default=os.environ.get("RDMAPROV_VALIDATE", "changed"),
                        help="after site.yml: 'changed' (default) validates the hosts where a "
                        "role changed something (none on a no-change re-run), 'always' every "
                        "host, 'never' none (env RDMAPROV_VALIDATE)")
    parser.add_argument("--no-validate", action="store_true",
                        default=os.environ.get("RDMAPROV_NO_VALIDATE", "") not in ("", "0"),
                        help="stop after site.yml, without the validation run: --validate never "
                        "(env RDMAPROV_NO_VALIDATE=1)")
    parser.set_defaults(func=run)


def exit_code(result: RunResult) -> int:
    if result.ok:
        return 0
    return 2 if result.failed_hosts else 1


VALIDATE_CHOICES = ("changed", "always", "never")


def validation_plan(args: argparse.Namespace, code: int, playbook: Path | None,
                    result: RunResult) -> tuple[list[str], str | None]:
    """The one rule for bootstrap's last phase: the hosts to validate, and why not, when none.

    A host whose roles changed nothing is as it was when last proven: a no-change re-run is not
    validated again unless --validate always."""
    mode = "never" if getattr(args, "no_validate", False) else getattr(args, "validate", "changed")
    if playbook is not None:
        return [], "a test playbook ran instead of site.yml"
    if code != 0:
        return [], "site.yml did not succeed on every host"
    if mode == "never":
        return [], "--no-validate" if getattr(args, "no_validate", False) else "--validate never"
    if args.check:
        return [], "--check changes nothing and proves nothing"
    if args.tags:
        return [], "--tags ran only part of site.yml"
    if mode == "always":
        return list(result.hosts), None
    changed = [name for name, host in result.hosts.items() if host.changed > 0]
    if not changed:
        return [], "no host changed; --validate always to prove them again"
    return changed, None


def _validate(args: argparse.Namespace, hosts: list[str], quiet: bool = False) -> dict:
    """Run the validation with its defaults (and their environment variables) and bootstrap's
    shared run options. -q: its verdict line only, or, when it fails, its whole table."""
    import io
    from dataclasses import replace

    from rdmaprov.validate import pipeline, request  # torch-free verdict code only

    # The hosts site.yml ran on, by name: a --retry-failed limit file is gone once they succeed.
    # --diff too: a validation changes no setting (validate refuses it, pipeline.unmeant).
    run = replace(options.of(args), check=False, diff=False, tags=(), skip_tags=(),
                  retry_failed=False, limit=",".join(hosts))
    req = request.build({"inventory": args.inventory,
                         "pairwise": os.environ.get("RDMAPROV_VALIDATE_PAIRWISE", "slow")}, run)
    human = sys.stderr if args.json else sys.stdout
    kept = io.StringIO()
    said: TextIO = kept if quiet else human
    print("validation: all_reduce across the hosts", file=said)
    report = pipeline.execute(req, said)
    doc = report.to_dict()
    if quiet and doc["passed"]:
        print("verdict: PASS", file=human)
    elif quiet:
        human.write(kept.getvalue())
    if not args.json and not (quiet and doc["passed"]):
        from rdmaprov.validate.report import print_table

        print_table(report, human)
    return doc


def run(args: argparse.Namespace, playbook: Path | None = None) -> int:
    """``playbook`` replaces site.yml (tests run fixture playbooks through the full path)."""
    options.check_choices(args)
    if args.validate not in VALIDATE_CHOICES:  # from the environment, past argparse's choices
        raise UserError(f"--validate/RDMAPROV_VALIDATE: {args.validate!r} is not one of "
                        f"{', '.join(VALIDATE_CHOICES)}")
    options.forks(args)
    options.apply_retry(args)
    inv = inventory_mod.load(args.inventory, limit=args.limit, extra_vars=args.extra_vars)
    book = playbook or find_playbook("site.yml")
    listed = options.list_only(args, inv, book)
    if listed is not None:
        return listed
    quiet = options.quiet(args)
    spec = options.run_spec(args, book, inv)
    human = sys.stderr if args.json else sys.stdout
    collector = drift.DriftCollector()
    with progress.Progress(human, hosts=inv.selected, verbose=args.verbose, quiet=quiet) as view:
        def on_event(ev: Mapping[str, Any], view: progress.Progress = view) -> None:
            view(ev)
            collector(ev)

        result = RunnerSession(spec, on_event=on_event).run()
    code = exit_code(result)
    reports = view.state.reports
    outcome.print_host_reports(result, reports, human, verbose=args.verbose, quiet=quiet)
    progress.print_summary(result, human, verbose=args.verbose,
                           table=outcome.wants_table(result, verbose=args.verbose, quiet=quiet))
    if args.diff:
        progress.print_drift(collector.rows, human, check=args.check)
    outcome.print_changes(result, reports, collector.rows, human, check=args.check,
                          diff=args.diff, verbose=args.verbose)
    if not args.check:
        retry = options.record_retry(args.inventory, list(result.hosts), result.failed_hosts)
        if retry is not None:
            print(f"retry the failed hosts: --retry-failed (or --limit @{retry})", file=human)
    if not quiet:
        print(f"strategy: {spec.strategy}", file=human)
    validation = None
    hosts, skip = validation_plan(args, code, playbook, result)
    if skip is None:
        if len(hosts) < len(inv.selected) and not quiet:
            print(f"validation: the hosts site.yml changed: {outcome.heading(hosts)}",
                  file=human)
        validation = _validate(args, hosts, quiet)
        code = max(code, int(validation["exit_code"]))
    elif playbook is None and not quiet:
        print(f"validation: skipped ({skip})", file=human)
    if args.json:
        doc = progress.result_document(result, code, view.state.reports)
        doc["strategy"] = spec.strategy
        doc["validation"] = validation
        if args.diff:
            doc["drift"] = collector.as_dicts()
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif code == 1 and result.error:
        print(f"rdmaprov: error: {result.error}", file=sys.stderr)
    return code
