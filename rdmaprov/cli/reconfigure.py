"""`rdmaprov reconfigure INVENTORY --set var=value ...`: a day-2 change, rolled out in batches.

Only the roles a change touches run (their tags, derived from the variable names), one
ansible-playbook run per batch; once more hosts have failed than --max-fail allows, the
rollout stops before the next batch. With --check --diff nothing changes and the drift table
shows, per host and setting, the current value and the wanted one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rdmaprov import drift, outcome, progress, setvars
from rdmaprov import inventory as inventory_mod
from rdmaprov.cli import options
from rdmaprov.engine import RunnerSession, RunResult
from rdmaprov.resources import collection_root
from rdmaprov.resources import playbook as find_playbook
from rdmaprov.textsafe import safe_line

EPILOG = options.EXIT_CODES_EPILOG + """\
     (reconfigure: also when the rollout stopped at --max-fail; the hosts not reached are listed)

--set values outrank every inventory value (Ansible extra vars) for this run; --write FILE
records them in the inventory's group_vars/ or host_vars/, or the next bootstrap puts the old
value back. A --set that another variable wins over on every selected host (net_mtu_default
where net_mtu_interfaces gives each interface its mtu) is refused, naming the winner; -e and
--set take the same forms (name=value pairs, YAML/JSON, @file).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reconfigure", help="change settings on running nodes, in batches, with a drift view",
        description="Apply a changed setting to running nodes: only the roles the change "
        "touches, in batches, stopping when too many hosts fail. --check --diff prints the "
        "drift (host x setting, current -> wanted) and changes nothing.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_inventory(p)
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="VAR=VALUE",
                   help="a role variable and its new value, repeatable, in -e's forms "
                        "(several a=1 b=2, YAML/JSON, @file); decides which roles run (no "
                        "--set: every role, or --tags)")
    p.add_argument("--write", metavar="FILE", type=Path,
                   help="after a rollout that succeeded on every host (not --check), record "
                        "the --set values in FILE, a group_vars/ or host_vars/ YAML file of the "
                        "inventory (e.g. INVENTORY_DIR/group_vars/all.yml), so that the next "
                        "bootstrap keeps them; checked before any host is touched")
    p.add_argument("--batch", metavar="N|N%",
                   help="hosts per batch, a count or a percentage of the selected hosts "
                        "(default: all at once)")
    p.add_argument("--max-fail", metavar="N|N%",
                   help="failed hosts tolerated before the rollout stops (default 0: stop "
                        "after the first batch with a failure)")
    options.add_run_options(p)
    options.add_quiet(p)
    p.set_defaults(func=run)


def merge(results: list[RunResult]) -> RunResult:
    hosts = {}
    for r in results:
        hosts.update(r.hosts)
    rc = max((r.rc for r in results), default=0)
    errors = [r.error for r in results if r.error]
    return RunResult(rc=rc, status="successful" if rc == 0 else "failed",
                     hosts=dict(sorted(hosts.items())),
                     artifacts_dir=results[-1].artifacts_dir if results else None,
                     error=errors[0] if errors else None)


def run(args: argparse.Namespace) -> int:
    options.check_choices(args)
    options.forks(args)
    quiet = options.quiet(args)
    settings = drift.parse_set(args.settings)
    roles: list[str] = []
    if settings:
        roles = drift.roles_for(list(settings), inventory_mod.load_specs(collection_root()))
    options.apply_retry(args)
    # --set values are extra vars (they outrank the inventory), checked like any -e value and
    # named --set in messages.
    inv = inventory_mod.load(args.inventory, limit=args.limit, extra_vars=args.extra_vars,
                             set_vars=settings)
    shadow_warnings = setvars.refuse_shadowed(settings, inv)
    write = setvars.plan_write(args.write, settings, inv) if args.write else None
    size = drift.batch_size(args.batch, len(inv.selected))
    budget = drift.max_failures(args.max_fail, len(inv.selected))
    book = find_playbook("reconfigure.yml")
    listed = options.list_only(args, inv, book)
    for line in shadow_warnings:
        print(f"rdmaprov: warning: {safe_line(line)}", file=sys.stderr)
    if listed is not None:
        return listed
    human = sys.stderr if args.json else sys.stdout
    plan = drift.batches(inv.selected, size)
    what = f"roles {', '.join(roles)}" if roles else "every role"
    if not quiet:
        print(f"reconfigure: {what}; {len(inv.selected)} hosts in {len(plan)} batch(es) of "
              f"{size}; stop after more than {budget} failed host(s)", file=human)

    results: list[RunResult] = []
    reports: dict[str, list[tuple[str, list[str]]]] = {}
    collector = drift.DriftCollector()
    failed: list[str] = []
    not_run: list[str] = []
    for n, batch in enumerate(plan, 1):
        if len(failed) > budget:
            not_run = [h for b in plan[n - 1:] for h in b]
            break
        spec = options.run_spec(args, book, inv)
        spec.limit = ",".join(batch)
        spec.host_count = len(batch)
        spec.tags = sorted({*spec.tags, *roles})
        if not quiet:
            print(f"batch {n}/{len(plan)}: {outcome.heading(batch)}", file=human)

        with progress.Progress(human, hosts=batch, verbose=args.verbose, quiet=quiet) as view:
            def on_event(ev: Any, view: progress.Progress = view) -> None:
                view(ev)
                collector(ev)

            result = RunnerSession(spec, on_event=on_event).run()
        results.append(result)
        reports.update(view.state.reports)
        # A host the run never mentions (a play error before it) counts as failed.
        failed += [h for h in batch if h not in result.hosts or not result.hosts[h].healthy]
        if result.error and not result.failed_hosts:
            not_run = [h for b in plan[n:] for h in b]
            break

    total = merge(results)
    stopped = bool(not_run)
    outcome.print_host_reports(total, reports, human, verbose=args.verbose, quiet=quiet)
    progress.print_summary(total, human, verbose=args.verbose,
                           table=outcome.wants_table(total, verbose=args.verbose, quiet=quiet))
    if args.diff:
        progress.print_drift(collector.rows, human, check=args.check)
    outcome.print_changes(total, reports, collector.rows, human, check=args.check,
                          diff=args.diff, verbose=args.verbose)
    if stopped:
        print(f"rollout stopped: {len(failed)} host(s) failed (allowed {budget}); not run: "
              f"{', '.join(not_run)}", file=human)
    code = 0 if total.ok and not stopped else (2 if failed or stopped else 1)
    if total.error and not failed:
        code = 1
    if not args.check:
        retry = options.record_retry(args.inventory, [h for b in plan for h in b
                                                      if h not in not_run], failed)
        if retry is not None:
            print(f"retry the failed hosts: --retry-failed (or --limit @{retry})", file=human)
    written = None
    if write is not None:
        if args.check:
            print(f"--write {write.shown}: not written (--check)", file=human)
        elif code != 0:
            print(f"--write {write.shown}: not written: the rollout did not succeed on every "
                  "host", file=human)
        else:
            print(safe_line(setvars.apply_write(write)), file=human)
            written = str(write.path)
    if args.json:
        doc = progress.result_document(total, code, reports)
        doc.update({"roles": roles, "settings": settings, "batches": plan,
                    "max_fail": budget, "stopped": stopped, "not_run": not_run,
                    "failed_hosts": failed, "drift": collector.as_dicts(),
                    "written": written})
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    elif code == 1 and total.error:
        print(f"rdmaprov: error: {total.error}", file=sys.stderr)
    return code
