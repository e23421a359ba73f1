"""`rdmaprov validate INVENTORY` / `rdmaprov validate --judge DIR`: the command's flags.

The run is rdmaprov.validate.pipeline (playbooks/validate.yml through the engine), the verdict
rdmaprov.validate.judge over the results directory, the outputs rdmaprov.validate.report.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import Any

from rdmaprov.cli import options
from rdmaprov.errors import UserError
from rdmaprov.validate import pipeline, request
from rdmaprov.validate.report import print_table

EPILOG = """\
exit codes:
  0  the fabric passed: every host ran, transport as required, bandwidth above the bar
  1  usage or input error: bad flag, inventory, variable; no host contacted
  2  the fabric failed: a host could not run (one line each), a check failed, or a host is
     slower than its peers (pairwise rounds name it)

--check, --diff, --tags, --skip-tags and --retry-failed are refused (exit 1, before any host):
a validation changes no host setting and its role is one proof. Only a run that launched the
worker (or found hosts that could not run) is recorded for `rdmaprov status`.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "validate",
        help="prove the fabric: all_reduce on every host at once, verdict per host",
        description="Start rdmaprov's all_reduce worker on every host at once (container or "
        "host runtime), fetch its JSON and NCCL_DEBUG=INFO log, and judge: the transport NCCL "
        "used (IB required for nccl unless told otherwise), GPUDirect RDMA if required, busbw "
        "against a fraction of the line rate or an explicit threshold. Pairwise rounds name "
        "the slow host. Flags override the inventory's nccl_validate_* variables.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_inventory(parser, required=False,
                          help="inventory file or directory (INI or YAML); not with --judge")
    parser.add_argument("--judge", type=Path, metavar="DIR",
                        help="judge a results directory that a run wrote (--results DIR, or "
                        "one copied from a cluster) with the verdict flags below; runs nothing")
    _setting(parser, "plan", "print the pair rounds a fleet of N hosts needs to name a slow "
             "host (for sizing a maintenance window); runs nothing")
    w = parser.add_argument_group("what runs (defaults: the inventory's nccl_validate_* values)")
    _setting(w, "runtime", "container (an image per host) or host (the host's python3) "
             "(env {env})")
    _setting(w, "image", "image with torch for the container runtime (env {env})")
    _setting(w, "backend", "nccl on GPU hosts, gloo on CPU-only ones (env {env})")
    _setting(w, "max_bytes", "largest all_reduce size, e.g. 256M (env {env})")
    _setting(w, "timeout", "seconds a run may take on a host before it is killed and reported "
             "(env {env}; default {role_default})")
    j = parser.add_argument_group("verdict")
    _setting(j, "transport", "required transport (env {env}; default IB for nccl, Socket for "
             "gloo)")
    _setting(j, "allow_socket", "accept NCCL on Socket (env {env}=1)")
    _setting(j, "require_gdr", "require GPUDirect RDMA (env {env}=1)")
    _setting(j, "bw_fraction", "busbw must reach this fraction of the slowest host's line rate "
             "(its ACTIVE ports of the HCAs NCCL used; env {env}; default {default})")
    _setting(j, "min_busbw", "explicit busbw threshold in GB/s, instead of the fraction of the "
             "line rate (env {env})", metavar="GBPS")
    _setting(j, "max_jitter", "UNSTABLE above this p99/p50 of the iteration times at the large "
             "sizes, for the fabric and each pair (env {env}; default {default}: a TCP "
             "retransmission, a PFC pause or a flap stretches single iterations several-fold; "
             "docs/validate.md)", metavar="RATIO")
    _setting(j, "rail_fraction", "the rail round: each HCA port's ib_write_bw must reach this "
             "fraction of that port's own rate (env {env}; default {default}; docs/validate.md)")
    _setting(j, "pairwise", "pair rounds in the same run, to name a slow host (3+ hosts; ring "
             "neighbours, then shifted pairs, a confirm round only when needed): auto when the "
             "fabric is below the bar or no bar is known; slow only when it is below the bar "
             "(env {env}; default {default})")
    _setting(j, "pair_fraction", "the relative rule: a pair is slow below this fraction of the "
             "best pair, even above the bar (env {env}; default {default})")
    _setting(j, "compare_socket", "run the sweep a second time with NCCL_IB_DISABLE=1 and print "
             "RDMA vs TCP side by side: busbw, the time of a 1 GiB all_reduce (scaled from the "
             "largest size when the sweep stops below 1 GiB, as gloo's does), CPU cores busy "
             "(env {env}=1)")
    s = parser.add_argument_group(
        "Slurm (the worker as a job step on allocated nodes, no inventory; docs/validate.md)")
    _setting(s, "launcher", "ansible: the inventory's hosts over SSH (default); slurm: salloc "
             "the nodes, srun the worker on them (env {env})")
    s.add_argument("-p", "--partition", metavar="P",
                   help="--launcher slurm: the partition to validate")
    _setting(s, "nodes", "--launcher slurm: how many nodes (default: the partition's idle "
             "ones)", short="-N")
    s.add_argument("--drain", action="store_true",
                   help="--launcher slurm: drain the hosts the verdict blames with 'rdmaprov: "
                        "validate: <reason>' (a node drained for another reason keeps it)")
    s.add_argument("--srun-arg", action="append", metavar="ARG",
                   help="--launcher slurm: one more srun argument (repeatable), e.g. "
                        "--srun-arg=--container-image=IMAGE with Pyxis")
    o = parser.add_argument_group("output")
    _setting(o, "junit", "also write a JUnit XML report (env {env})", metavar="FILE")
    _setting(o, "html", "also write a self-contained HTML report: verdict, checks, hosts, "
             "pairs, busbw against message size (env {env})", metavar="FILE")
    _setting(o, "results", "keep the fetched results (worker JSON, NCCL logs, counters) in DIR "
             "(env {env}; default: a temporary dir, removed)", metavar="DIR")
    options.add_run_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # --judge builds millions of objects (10,000 hosts' files, every pair's rows) that all live
    # until the report is printed: the cycle collector's passes over them find nothing and cost
    # a fifth of the CPU. Paused for that path only, and back on after it.
    paused = getattr(args, "judge", None) is not None and gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _run(args)
    finally:
        if paused:
            gc.enable()


# What runs no playbook (its flag) -> the run options it would drop: ansible-playbook's, and
# -e where nothing takes it (the Slurm launcher reads -e nccl_validate_*).
RUNS_NO_PLAYBOOK = {"--plan": "plan", "--judge DIR": "judge", "--launcher slurm": "launcher"}
PLAYBOOK_FLAGS = (
    ("limit", "--limit"), ("list_hosts", "--list-hosts"), ("list_tasks", "--list-tasks"),
    ("remote_user", "--user"), ("private_key", "--private-key"), ("ask_pass", "--ask-pass"),
    ("connection_password_file", "--connection-password-file"),
    ("ask_become_pass", "--ask-become-pass"), ("become_password_file", "--become-password-file"),
    ("ask_vault_pass", "--ask-vault-pass"), ("vault_password_files", "--vault-password-file"))


def refuse_dropped(args: argparse.Namespace) -> None:
    """Every flag given that this validation would drop, one line each, before anything runs:
    ansible-playbook's that a validation gives no meaning (pipeline.unmeant, on every path),
    and the playbook's own where no playbook runs (--plan, --judge, --launcher slurm)."""
    problems = pipeline.unmeant(args)
    for word, dest in RUNS_NO_PLAYBOOK.items():
        value = getattr(args, dest, None)
        if value is None or (dest == "launcher" and value != "slurm"):
            continue
        flags: tuple[tuple[str, str], ...] = PLAYBOOK_FLAGS
        if dest == "launcher":  # it reads -e nccl_validate_*; slurm.check_flags words --limit
            flags = tuple(f for f in flags if f[0] != "limit")
        else:
            flags += (("extra_vars", "--extra-vars"),)
        problems += [f"{flag}: {word} runs no playbook on the inventory's hosts; it would be "
                     "dropped" for name, flag in flags if getattr(args, name, None)]
        problems += [f"{request.SETTINGS[name].flag}: {why}" for name, why in
                     _not_for(dest).items() if _given(args, name)]
        if dest == "plan" and args.json:
            problems.append("--json: --plan prints the rounds as text")
        break
    if problems:
        raise UserError("\n".join(problems))


def _not_for(dest: str) -> dict[str, str]:
    """The settings (request.SETTINGS) that --plan, --judge DIR or --launcher slurm would drop:
    name -> why."""
    if dest == "plan":
        return {s.name: "--plan sizes the pair rounds from a host count only; it runs and "
                        "judges nothing" for s in request.TABLE.VALIDATE if s.name != "plan"}
    if dest == "judge":
        ran = "--judge DIR judges what a run already wrote"
        return {**{s.name: f"{ran}; it runs nothing" for s in request.TABLE.VALIDATE
                   if s.group in ("run", "slurm") and s.name != "launcher"},
                "results": f"{ran}: DIR is the results directory",
                "compare_socket": f"{ran}: a socket run in DIR is judged whenever it is there"}
    return {"image": "--launcher slurm runs the worker as the job step: for an image use "
                     "Pyxis, --srun-arg=--container-image=IMAGE"}


def _given(args: argparse.Namespace, name: str) -> bool:
    """A setting given on the command line (its value is not what the environment or the
    default would make it)."""
    value = getattr(args, name, None)
    default = request.env_default(name)
    return value is not None and value is not False and str(value) != str(default)


def _run(args: argparse.Namespace) -> int:
    human = sys.stderr if args.json else sys.stdout
    given = vars(args)
    refuse_dropped(args)
    if args.plan is not None:
        from rdmaprov.validate.rounds import plan

        print(plan(request.judged(given, ["plan"])["plan"]).describe())
        return 0
    from rdmaprov.validate import slurm

    slurm.check_flags(given)
    if args.launcher == "slurm":
        report = slurm.execute(request.build(given, options.of(args)), human)
    elif args.judge is not None:
        if args.inventory is not None:
            raise UserError("--judge DIR judges a results directory: give no inventory with it")
        report = pipeline.judge_dir(request.build(given, options.of(args)))
    elif args.inventory is None:
        raise UserError("validate: give an INVENTORY to run, or --judge DIR to judge a results "
                        "directory")
    else:
        options.check_choices(args)
        options.forks(args)
        if args.list_hosts or args.list_tasks:
            from rdmaprov import inventory as inventory_mod
            from rdmaprov.resources import playbook as find_playbook

            inv = inventory_mod.load(args.inventory, limit=args.limit,
                                     extra_vars=args.extra_vars)
            return int(options.list_only(args, inv, find_playbook("validate.yml")) or 0)
        report = pipeline.execute(request.build(given, options.of(args)), human)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print_table(report, human)
    return report.exit_code


def _setting(group: Any, name: str, text: str, metavar: str | None = None,
             short: str | None = None) -> None:
    """One setting of the table (ranges.VALIDATE): its flag, environment variable and default
    come from its entry; ``text`` is its help, with {env}, {default}, {role_default}."""
    s = request.SETTINGS[name]
    kw: dict[str, Any] = {"dest": name, "default": request.env_default(name),
                          "help": text.format(env=s.env, default=s.default,
                                              role_default=s.role_default)}
    if s.default is False:
        kw["action"] = "store_true"
    else:
        kw["metavar"] = metavar or ("N" if s.form == "count" else None)
        if s.choices:
            kw["choices"] = s.choices
        if s.group == "output":
            kw["type"] = Path
    group.add_argument(*([short] if short else []), s.flag, **kw)
