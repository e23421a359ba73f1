"""`rdmaprov validate INVENTORY` / `rdmaprov validate --judge DIR`: the command's flags.

The run is rdmaprov.validate.pipeline (playbooks/validate.yml through the engine), the verdict
rdmaprov.validate.judge over the results directory, the outputs rdmaprov.validate.report.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

from rdmaprov.cli import options
from rdmaprov.errors import UserError
from rdmaprov.validate import pipeline
from rdmaprov.validate import verdict as V
from rdmaprov.validate.judge import DEFAULT_PAIR_FRACTION
from rdmaprov.validate.pipeline import PAIRWISE
from rdmaprov.validate.report import Report, print_table

EPILOG = """\
exit codes:
  0  the fabric passed: every host ran, transport as required, bandwidth above the bar
  1  usage or input error: bad flag, inventory, variable; no host contacted
  2  the fabric failed: a host could not run (one line each), a check failed, or a host is
     slower than its peers (pairwise rounds name it)
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
    parser.add_argument("inventory", type=Path, nargs="?",
                        help="inventory file or directory (INI or YAML); not with --judge")
    parser.add_argument("--judge", type=Path, metavar="DIR",
                        help="judge a results directory that a run wrote (--results DIR, or "
                        "one copied from a cluster) with the verdict flags below; runs nothing")
    parser.add_argument("--plan", metavar="N",
                        help="print the pair rounds a fleet of N hosts needs to name a slow host "
                        "(for sizing a maintenance window); runs nothing")
    env = os.environ.get
    w = parser.add_argument_group("what runs (defaults: the inventory's nccl_validate_* values)")
    w.add_argument("--runtime", choices=("container", "host"),
                   default=env("RDMAPROV_VALIDATE_RUNTIME"),
                   help="container (an image per host) or host (the host's python3) "
                        "(env RDMAPROV_VALIDATE_RUNTIME)")
    w.add_argument("--image", default=env("RDMAPROV_VALIDATE_IMAGE"),
                   help="image with torch for the container runtime (env RDMAPROV_VALIDATE_IMAGE)")
    w.add_argument("--backend", choices=("nccl", "gloo"), default=env("RDMAPROV_VALIDATE_BACKEND"),
                   help="nccl on GPU hosts, gloo on CPU-only ones (env RDMAPROV_VALIDATE_BACKEND)")
    w.add_argument("--max-bytes", default=env("RDMAPROV_VALIDATE_MAX_BYTES"),
                   help="largest all_reduce size, e.g. 256M (env RDMAPROV_VALIDATE_MAX_BYTES)")
    w.add_argument("--timeout", default=env("RDMAPROV_VALIDATE_TIMEOUT"),
                   help="seconds a run may take on a host before it is killed and reported "
                        "(env RDMAPROV_VALIDATE_TIMEOUT; default 600)")
    j = parser.add_argument_group("verdict")
    j.add_argument("--transport", choices=("IB", "Socket"),
                   default=env("RDMAPROV_VALIDATE_TRANSPORT"),
                   help="required transport (env RDMAPROV_VALIDATE_TRANSPORT; default IB for "
                        "nccl, Socket for gloo)")
    j.add_argument("--allow-socket", action="store_true",
                   default=env("RDMAPROV_VALIDATE_ALLOW_SOCKET") == "1",
                   help="accept NCCL on Socket (env RDMAPROV_VALIDATE_ALLOW_SOCKET=1)")
    j.add_argument("--require-gdr", action="store_true",
                   default=env("RDMAPROV_VALIDATE_REQUIRE_GDR") == "1",
                   help="require GPUDirect RDMA (env RDMAPROV_VALIDATE_REQUIRE_GDR=1)")
    j.add_argument("--bw-fraction",
                   default=env("RDMAPROV_VALIDATE_BW_FRACTION", str(V.DEFAULT_BW_FRACTION)),
                   help="busbw must reach this fraction of the slowest host's line rate "
                        "(its ACTIVE ports of the HCAs NCCL used; env "
                        f"RDMAPROV_VALIDATE_BW_FRACTION; default {V.DEFAULT_BW_FRACTION})")
    j.add_argument("--min-busbw", default=env("RDMAPROV_VALIDATE_MIN_BUSBW"),
                   metavar="GBPS", help="explicit busbw threshold in GB/s, instead of the "
                   "fraction of the line rate (env RDMAPROV_VALIDATE_MIN_BUSBW)")
    j.add_argument("--max-jitter",
                   default=env("RDMAPROV_VALIDATE_MAX_JITTER", str(V.DEFAULT_MAX_JITTER)),
                   metavar="RATIO", help="UNSTABLE above this p99/p50 of the iteration times at "
                   "the large sizes, for the fabric and each pair (env "
                   f"RDMAPROV_VALIDATE_MAX_JITTER; default {V.DEFAULT_MAX_JITTER}: a TCP "
                   "retransmission, a PFC pause or a flap stretches single iterations "
                   "several-fold; docs/validate.md)")
    j.add_argument("--rail-fraction",
                   default=env("RDMAPROV_VALIDATE_RAIL_FRACTION", str(V.DEFAULT_RAIL_FRACTION)),
                   help="the rail round: each HCA port's ib_write_bw must reach this fraction of "
                        "that port's own rate (env RDMAPROV_VALIDATE_RAIL_FRACTION; default "
                        f"{V.DEFAULT_RAIL_FRACTION}; docs/validate.md)")
    j.add_argument("--pairwise", choices=PAIRWISE,
                   default=env("RDMAPROV_VALIDATE_PAIRWISE", "auto"),
                   help="pair rounds in the same run, to name a slow host (3+ hosts; ring "
                        "neighbours, then shifted pairs, a confirm round only when needed): auto "
                        "when the fabric is below the bar or no bar is known; slow only when it "
                        "is below the bar (env RDMAPROV_VALIDATE_PAIRWISE; default auto)")
    j.add_argument("--pair-fraction",
                   default=env("RDMAPROV_VALIDATE_PAIR_FRACTION", str(DEFAULT_PAIR_FRACTION)),
                   help="the relative rule: a pair is slow below this fraction of the best "
                        "pair, even above the bar (env RDMAPROV_VALIDATE_PAIR_FRACTION; "
                        f"default {DEFAULT_PAIR_FRACTION})")
    j.add_argument("--compare-socket", action="store_true",
                   default=env("RDMAPROV_VALIDATE_COMPARE_SOCKET") == "1",
                   help="run the sweep a second time with NCCL_IB_DISABLE=1 and print RDMA vs "
                        "TCP side by side: busbw, the time of a 1 GiB all_reduce (scaled from the "
                        "largest size when the sweep stops below 1 GiB, as gloo's does), CPU cores "
                        "busy (env RDMAPROV_VALIDATE_COMPARE_SOCKET=1)")
    s = parser.add_argument_group(
        "Slurm (the worker as a job step on allocated nodes, no inventory; docs/validate.md)")
    s.add_argument("--launcher", choices=("ansible", "slurm"),
                   default=env("RDMAPROV_VALIDATE_LAUNCHER", "ansible"),
                   help="ansible: the inventory's hosts over SSH (default); slurm: salloc the "
                        "nodes, srun the worker on them (env RDMAPROV_VALIDATE_LAUNCHER)")
    s.add_argument("-p", "--partition", metavar="P",
                   help="--launcher slurm: the partition to validate")
    s.add_argument("-N", "--nodes", metavar="N",
                   help="--launcher slurm: how many nodes (default: the partition's idle ones)")
    s.add_argument("--drain", action="store_true",
                   help="--launcher slurm: drain the hosts the verdict blames with 'rdmaprov: "
                        "validate: <reason>' (a node drained for another reason keeps it)")
    s.add_argument("--srun-arg", action="append", metavar="ARG",
                   help="--launcher slurm: one more srun argument (repeatable), e.g. "
                        "--srun-arg=--container-image=IMAGE with Pyxis")
    o = parser.add_argument_group("output")
    o.add_argument("--junit", type=Path, metavar="FILE", default=env("RDMAPROV_VALIDATE_JUNIT"),
                   help="also write a JUnit XML report (env RDMAPROV_VALIDATE_JUNIT)")
    o.add_argument("--html", type=Path, metavar="FILE", default=env("RDMAPROV_VALIDATE_HTML"),
                   help="also write a self-contained HTML report: verdict, checks, hosts, "
                        "pairs, busbw against message size (env RDMAPROV_VALIDATE_HTML)")
    o.add_argument("--results", type=Path, metavar="DIR", default=env("RDMAPROV_VALIDATE_RESULTS"),
                   help="keep the fetched results (worker JSON, NCCL logs, counters) in DIR "
                        "(env RDMAPROV_VALIDATE_RESULTS; default: a temporary dir, removed)")
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


def _run(args: argparse.Namespace) -> int:
    human = sys.stderr if args.json else sys.stdout
    if args.plan is not None:
        from rdmaprov.validate.rounds import plan

        pipeline.judge_flags(args, ["--plan"])
        print(plan(args.plan).describe())
        return 0
    from rdmaprov.validate import slurm

    slurm.check_flags(args)
    if args.launcher == "slurm":
        report = slurm.execute(args, pipeline.check_flags(args), human)
    elif args.judge is not None:
        if args.inventory is not None:
            raise UserError("--judge DIR judges a results directory: give no inventory with it")
        report = pipeline.judge_dir(args)
    elif args.inventory is None:
        raise UserError("validate: give an INVENTORY to run, or --judge DIR to judge a results "
                        "directory")
    else:
        report = pipeline.execute(args, human)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print_table(report, human)
    return report.exit_code


def defaults(inventory: Path) -> argparse.Namespace:
    """validate's options at their defaults (what `bootstrap` runs as its last phase)."""
    parser = argparse.ArgumentParser(add_help=False)
    register(parser.add_subparsers())
    return parser.parse_args(["validate", str(inventory)])


def execute(args: argparse.Namespace) -> Report:
    """The run, for `bootstrap`'s last phase."""
    return pipeline.execute(args, sys.stderr if args.json else sys.stdout)
