"""`rdmaprov check`: is this node fit to run an RDMA job right now? Local, no Ansible, no
network: RDMA ports, kernel modules, MTU, RoCE QoS, memlock, GPUs, GPUDirect RDMA (peermem or
DMA-BUF), port error counters over time, and on request a single-node NCCL loopback. Made for
a Slurm prolog or health-check program: with
--drain it also drains this node (or resumes it) the way NHC does, see rdmaprov/check/slurm.py.

Every outcome rewrites the --prometheus textfile, a configuration error included (then
rdmaprov_check_healthy is 0 and rdmaprov_check_config_error 1), so a dashboard never shows a
node healthy that its check could not judge."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from rdmaprov.check import expect, history, judge, kernel, output, probes
from rdmaprov.check import nccl as nccl_check
from rdmaprov.errors import UserError


class NotARoot(UserError):
    """--sysroot names no node root: a configuration error that never drains."""


EXIT_HEALTHY = 0
EXIT_UNHEALTHY = 2
# What --drain leaves for the end of --budget after the NCCL loopback: scontrol and output.
BUDGET_RESERVE_S = 5.0

EPILOG = """\
exit codes:
  0  healthy
  1  usage or configuration error (one line on stderr); nothing was judged
  2  unhealthy: the reason line (stdout, or the JSON's "reason") is fit for
     scontrol update nodename=$(hostname) state=drain reason="..."

--drain (Slurm, as LBNL NHC): unhealthy drains this node with "rdmaprov: <reason>"
(a configuration error with "rdmaprov: config error: ..."; never for a --sysroot
that is not a node's root), unless it is DOWN or
already drained for another reason (that reason is kept); healthy resumes it only
if rdmaprov drained it (a local marker, drained-by-rdmaprov beside the link state
file, says so: a healthy node without it makes no Slurm call at all). The exit
code stays the verdict's.

configuration file (YAML, same names as the flags; flags win), e.g. /etc/rdmaprov/check.yml:
  ports: 8          # ACTIVE RDMA ports wanted
  rate: 400         # Gb/s per port
  mtu: 9000         # on the RDMA netdevs and 'interfaces'
  pfc_priority: 3   # RoCE only
  gpus: 8
"""


def _csv(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="local pre-job node check (ports, modules, MTU, QoS, memlock, GPUs)",
        description="Check this node against what an RDMA GPU job needs, locally (no Ansible, "
        "no network to other nodes), in well under 5 s without --nccl.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    env = os.environ.get
    p.add_argument("--config", type=Path, default=env("RDMAPROV_CHECK_CONFIG") or None,
                   help="expectations file (env RDMAPROV_CHECK_CONFIG; default "
                        f"{expect.DEFAULT_CONFIG} under --sysroot, else here, when it exists)")
    e = p.add_argument_group("expectations (override the file)")
    e.add_argument("--expect-ports", metavar="N",
                   help="ACTIVE RDMA ports wanted (default: at least 1)")
    e.add_argument("--expect-rate", metavar="GBPS",
                   help="link rate every ACTIVE port must reach, Gb/s (e.g. 200, 400)")
    e.add_argument("--expect-link-layer", choices=("InfiniBand", "Ethernet"),
                   help="only count ports of this link layer")
    e.add_argument("--hca", action="append", metavar="DEV",
                   help="only these RDMA devices (comma-separated, repeatable; each must exist)")
    e.add_argument("--expect-hca-pci", action="append", metavar="ADDR",
                   help="PCI addresses of the HCAs that must be there, e.g. 0000:3b:00.0 "
                        "(comma-separated, repeatable): a missing card is named by address "
                        "and slot, not by a name that shifted")
    e.add_argument("--expect-mtu", metavar="MTU",
                   help="MTU of the RDMA netdevs and of --interface")
    e.add_argument("--interface", action="append", metavar="IF",
                   help="more netdevs to check MTU (and PFC) on (comma-separated, repeatable)")
    e.add_argument("--module", action="append", metavar="MOD",
                   help="kernel modules that must be loaded or built in, replacing the default "
                        f"{','.join(expect.DEFAULT_MODULES)} (comma-separated, repeatable)")
    e.add_argument("--expect-pfc", metavar="PRIO",
                   help="RoCE: PFC must be on this priority only, trust dscp")
    e.add_argument("--expect-gpus", metavar="N",
                   help="GPUs that must be visible (default: at least 1; 0: not a GPU node)")
    e.add_argument("--no-gpudirect", "--no-peermem", dest="peermem", action="store_const",
                   const=False, help="do not require GPUDirect RDMA (nvidia_peermem loaded, or "
                                     "DMA-BUF: open NVIDIA module, Linux >= 5.12, rdma-core 34+)")
    e.add_argument("--expect-memlock", metavar="KIB",
                   help="'unlimited' (default) or a minimum memlock limit in KiB")
    e.add_argument("--nccl", action="store_const", const=True,
                   help="also run a single-node NCCL all_reduce loopback (needs torch; slower)")
    e.add_argument("--nccl-python", metavar="PYTHON",
                   help="the Python with torch the loopback runs in (env "
                        "RDMAPROV_CHECK_NCCL_PYTHON; default: rdmaprov's own). No torch there "
                        "is a configuration error (exit 1), not an unhealthy node")
    e.add_argument("--nccl-min-busbw", metavar="GBPS",
                   help="bus bandwidth the loopback must reach, GB/s (2+ GPUs)")
    e.add_argument("--budget", type=float, metavar="SECONDS",
                   default=env("RDMAPROV_CHECK_BUDGET") or None,
                   help="wall-clock limit for the whole check; the NCCL loopback gets what is "
                        f"left less {BUDGET_RESERVE_S:.0f} s and fails when it runs out. Keep it "
                        "under PrologEpilogTimeout, NHC's TIMEOUT (30 s) or the 60 s Slurm "
                        "gives a HealthCheckProgram (env RDMAPROV_CHECK_BUDGET; default "
                        f"{nccl_check.TIMEOUT_S} s for the loopback)")
    o = p.add_argument_group("output")
    mode = o.add_mutually_exclusive_group()
    mode.add_argument("--json", action="store_true", help="one JSON document on stdout")
    mode.add_argument("--nhc", action="store_true",
                      help="NHC style: nothing when healthy, else only the reason line")
    o.add_argument("--prometheus", type=Path, metavar="PATH",
                   default=env("RDMAPROV_CHECK_PROMETHEUS") or None,
                   help="also write node_exporter textfile-collector metrics to PATH (a .prom "
                        "file, or a directory) (env RDMAPROV_CHECK_PROMETHEUS)")
    s = p.add_argument_group("Slurm")
    s.add_argument("--drain", action="store_true",
                   help="drain this node when unhealthy, resume it when healthy if rdmaprov "
                        "drained it (NHC's rules, see below; needs sinfo and scontrol)")
    s.add_argument("--node-name", metavar="NAME",
                   help="this node's Slurm name (env SLURMD_NODENAME, which slurmd sets for a "
                        "prolog or health check; default: the short host name)")
    p.add_argument("--link-state", metavar="FILE", default=env("RDMAPROV_CHECK_LINK_STATE"),
                   help="state file of port counters between checks (env "
                        "RDMAPROV_CHECK_LINK_STATE; default "
                        f"{expect.DEFAULT_LINK_STATE}, under --sysroot when one is given; "
                        "'' keeps none)")
    p.add_argument("--kernel-log", action="store_true", default=None,
                   help="also read the kernel's messages since the last check (/dev/kmsg) with "
                        "explain's rules and report them (never a drain on their own); "
                        "kernel_log in the config")
    p.add_argument("--sysroot", default=env("RDMAPROV_CHECK_SYSROOT", "/"), metavar="DIR",
                   help="read /sys, /proc, /dev and /lib/modules under DIR, e.g. a host's "
                        "mounted in a container, or a fixture root for tests and diagnosis "
                        "(env RDMAPROV_CHECK_SYSROOT; default /)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    try:
        return _run(args, started)
    except UserError as exc:  # a configuration error: not judged, and said so everywhere
        _config_error(args.prometheus, str(exc), time.perf_counter() - started)
        # A root that is not one says nothing about this node (a missing host mount would be
        # the same on every node): never a drain.
        if args.drain and not isinstance(exc, NotARoot):
            _drain(args, f"config error: {exc}", quiet=args.nhc or args.json)
        raise


def on_usage_error(argv: list[str], message: str) -> None:
    """A bad flag (argparse): rewrite the textfile named on the command line or in the
    environment. No drain: a command line that does not parse cannot say it wanted one."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--prometheus", type=Path,
                     default=os.environ.get("RDMAPROV_CHECK_PROMETHEUS") or None)
    target = pre.parse_known_args(argv)[0].prometheus
    _config_error(target, message, 0.0)


def _config_error(target: Path | None, message: str, elapsed: float) -> None:
    if target is None:
        return
    # An OSError: the textfile's own path is what is wrong, and the error line says so already.
    with contextlib.suppress(OSError):
        output.write_prometheus(output.error_document(message, elapsed), target)


def _node_name(args: argparse.Namespace) -> str:
    return (args.node_name or os.environ.get("SLURMD_NODENAME")
            or os.uname().nodename.split(".")[0])  # gethostname(2) is uname's nodename


MARKER = "drained-by-rdmaprov"


def _marker(args: argparse.Namespace) -> Path:
    """The local note that rdmaprov drained this node, beside the link state file (under
    --sysroot when one is given, as that file is). While it is absent a healthy check asks
    Slurm nothing: no RPC per job start on a healthy fleet."""
    state = getattr(args, "link_state_resolved", None) or args.link_state
    if not state:
        state = str(expect.DEFAULT_LINK_STATE)
        if os.path.realpath(args.sysroot) != "/":
            state = str(Path(args.sysroot) / state.lstrip("/"))
    return Path(state).parent / MARKER


def _drain(args: argparse.Namespace, problem: str | None, quiet: bool) -> None:
    from rdmaprov.check import slurm

    marker = _marker(args)
    if problem is None and not marker.exists():
        return  # healthy, and not drained by us: nothing to undo, so no call to slurmctld
    problem = None if problem is None else output.nhc_line(problem)
    try:
        action = slurm.apply(_node_name(args), problem)
    except slurm.SlurmError as exc:
        print(f"rdmaprov check: --drain: {exc}", file=sys.stderr)
        return
    try:
        if problem is None:
            marker.unlink(missing_ok=True)  # resumed, or someone else's drain now: not ours
        elif action.kind == "drain" or action.why == "already drained with this reason":
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(action.reason or slurm.reason_text(problem))
    except OSError as exc:
        print(f"rdmaprov check: --drain: {marker}: {exc.strerror or exc} (a healthy check "
              "will not know to resume this node)", file=sys.stderr)
    if not quiet or action.kind != "none":
        print(f"slurm {_node_name(args)}: {action.why}", file=sys.stderr)


def _run(args: argparse.Namespace, started: float) -> int:
    if args.budget is not None and args.budget <= 0:
        raise UserError(f"--budget {args.budget:g}: must be more than 0 seconds")
    exp = expect.build(args.config, {
        "ports": args.expect_ports, "rate": args.expect_rate,
        "link_layer": args.expect_link_layer, "hcas": _csv(args.hca), "mtu": args.expect_mtu,
        "hca_pci": _csv(args.expect_hca_pci),
        "interfaces": _csv(args.interface), "modules": _csv(args.module),
        "pfc_priority": args.expect_pfc, "gpus": args.expect_gpus, "peermem": args.peermem,
        "memlock": args.expect_memlock, "nccl": args.nccl,
        "nccl_min_busbw": args.nccl_min_busbw, "link_state": args.link_state,
        "nccl_python": args.nccl_python or os.environ.get("RDMAPROV_CHECK_NCCL_PYTHON") or None,
        "kernel_log": args.kernel_log,
    }, root=args.sysroot)
    # A flag given for a part that does not run would be dropped: refused (one line each).
    unused = [f"{flag}: {why}" for flag, given, why in (
        ("--nccl-python", args.nccl_python, "for the NCCL loopback, which is off (--nccl, or "
                                             "nccl: true in the config)"),
        ("--nccl-min-busbw", args.nccl_min_busbw, "for the NCCL loopback, which is off "
                                                  "(--nccl, or nccl: true in the config)"),
        ("--node-name", args.node_name, "names this node to Slurm for --drain, which is not "
                                        "given")) if given and (
        not exp.nccl if flag != "--node-name" else not args.drain)]
    if unused:
        raise UserError("\n".join(unused))
    if not Path(args.sysroot).is_dir():
        raise NotARoot(f"--sysroot {args.sysroot}: no such directory")
    problem = probes.root_problem(args.sysroot)
    if problem is not None:
        raise NotARoot(problem)
    if exp.nccl:
        problem = nccl_check.python_problem(exp.nccl_python or sys.executable,
                                            named=bool(exp.nccl_python))
        if problem is not None:
            raise UserError(problem)
    if args.prometheus is not None and not (args.prometheus.is_dir()
                                            or args.prometheus.parent.is_dir()):
        raise UserError(f"--prometheus {args.prometheus}: its directory does not exist")
    if exp.link_state == str(expect.DEFAULT_LINK_STATE) and os.path.realpath(args.sysroot) != "/":
        # The history belongs to the root it describes (a fixture, a host mounted elsewhere).
        exp.link_state = str(Path(args.sysroot) / str(expect.DEFAULT_LINK_STATE).lstrip("/"))
    args.link_state_resolved = exp.link_state or None
    state = probes.gather(exp, args.sysroot)
    state["links"] = history.step(state["rdma"]["counters"], exp)
    state["aer"]["history"] = history.aer_step(state["aer"]["counts"], exp,
                                               kernel.boot_id(args.sysroot))
    if exp.kernel_log:
        state["kernel"] = kernel.step(args.sysroot, Path(exp.link_state).with_name(
            kernel.STATE_NAME) if exp.link_state else None)
    items = judge.judge(state, exp)
    if exp.nccl:
        gpus = int(state["gpus"].get("count") or 0)
        if gpus == 0:
            items.append(judge.Item("nccl", "fail", "NCCL loopback needs a GPU; none visible"))
        else:
            timeout = float(nccl_check.TIMEOUT_S)
            if args.budget is not None:
                timeout = args.budget - BUDGET_RESERVE_S - (time.perf_counter() - started)
            loop = (nccl_check.run(gpus, python=exp.nccl_python, timeout=timeout)
                    if timeout > 0 else
                    {"ok": False, "error": f"--budget {args.budget:g} s leaves no time for it",
                     "doc": None, "nccl": None})
            state["nccl"] = {k: v for k, v in loop.items() if k != "doc"}
            items.append(nccl_check.check(loop, exp))
    reason = judge.reason(items)
    reason = None if reason is None else output.nhc_line(reason)
    doc = output.document(items, reason, state, exp.as_dict(), time.perf_counter() - started)
    if args.prometheus is not None:
        try:
            output.write_prometheus(doc, args.prometheus)
        except OSError as exc:
            raise UserError(f"--prometheus {args.prometheus}: {exc.strerror or exc}") from None
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    elif args.nhc:
        if reason is not None:
            sys.stdout.write(reason + "\n")
    else:
        output.table(items, reason, sys.stdout)
    if args.drain:
        _drain(args, reason, quiet=args.nhc or args.json)
    return EXIT_HEALTHY if reason is None else EXIT_UNHEALTHY
