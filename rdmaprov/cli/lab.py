"""`rdmaprov lab up|status|down|restart|exec`: real nodes on this machine to run rdmaprov on."""

from __future__ import annotations

import argparse
import json
import os
import sys

from rdmaprov.lab import Lab
from rdmaprov.lab.netstack import NETSTACKS


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "lab",
        help="bring up / tear down a lab of real nodes on this machine (needs root)",
        description="A lab node is a network namespace on a bridge, an overlay root over a "
        "debootstrapped Debian, systemd as PID 1 and sshd. State lives in "
        "/var/lib/rdmaprov/lab/NAME (RDMAPROV_LAB_DIR); the base image is cached in "
        "/var/cache/rdmaprov/lab (RDMAPROV_LAB_CACHE).",
    )
    lab_sub = parser.add_subparsers(dest="lab_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--name", default=os.environ.get("RDMAPROV_LAB_NAME", "lab"),
                       help="lab name, 1-8 lowercase letters/digits "
                       "(env RDMAPROV_LAB_NAME; default lab)")

    up = lab_sub.add_parser("up", help="start the lab's nodes and write its inventory")
    common(up)
    up.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    up.add_argument("--subnet",
                    help="IPv4 subnet for the lab bridge (default: a free 10.199.X.0/24)")
    up.add_argument("--fabric-subnet",
                    help="IPv4 subnet of the fabric network, eth1 (default: a free 10.198.X.0/24)")
    up.add_argument("--mtu", type=int,
                    help="MTU of the management network, eth0 (default 1500)")
    up.add_argument("--fabric-mtu", type=int,
                    help="MTU of the fabric 'switch' (bridge and its ports); nodes' eth1 start "
                    "at 1500 as on a fresh host (default 9000)")
    up.add_argument("--mirror", help="archive mirror for the base image "
                    "(default: the first one in this host's apt configuration)")
    up.add_argument("--suite", default=os.environ.get("RDMAPROV_LAB_SUITE"),
                    help="Debian suite of the nodes, e.g. bookworm or trixie; each suite has its "
                    "own base image and apt repository (env RDMAPROV_LAB_SUITE; default: this "
                    "host's, from /etc/os-release)")
    up.add_argument("--netstack", choices=NETSTACKS,
                    default=os.environ.get("RDMAPROV_LAB_NETSTACK"),
                    help="network stack that owns the fabric interface eth1 in the nodes: "
                    "NetworkManager, netplan with systemd-networkd, ifupdown, or none (its "
                    "address set from outside) (env RDMAPROV_LAB_NETSTACK; default none)")
    up.add_argument("--slurm", action="store_true",
                    help="also install Debian's munge, slurmctld (node1) and slurmd (every node) "
                    "from the lab's repository, and wait until sinfo shows every node idle")
    up.set_defaults(func=_up)

    status = lab_sub.add_parser("status", help="show the lab's nodes")
    common(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=_status)

    down = lab_sub.add_parser("down", help="stop the nodes; leave no namespace, mount or bridge")
    common(down)
    down.set_defaults(func=_down)

    restart = lab_sub.add_parser(
        "restart", help="reboot a node: clean shutdown of its systemd, then a fresh boot with "
        "new NICs (eth1 back at 1500), so only persisted settings come back")
    common(restart)
    restart.add_argument("node", nargs="+")
    restart.set_defaults(func=_restart)

    ex = lab_sub.add_parser("exec", help="run a command inside a node, without SSH")
    common(ex)
    ex.add_argument("node")
    ex.add_argument("argv", nargs=argparse.REMAINDER, help="command (after --)")
    ex.set_defaults(func=_exec)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr)


def _up(args: argparse.Namespace) -> int:
    lab = Lab(args.name)
    try:
        _bring_up(lab, args)
    except RuntimeError as exc:  # a node that did not boot, a host setting a node changed
        print(f"rdmaprov lab: error: {exc}", file=sys.stderr)
        return 2
    print(lab.inventory)
    return 0


def _bring_up(lab: Lab, args: argparse.Namespace) -> None:
    lab.up(nodes=args.nodes, subnet=args.subnet, mirror=args.mirror, suite=args.suite,
           mtu=args.mtu, fabric_subnet=args.fabric_subnet, fabric_mtu=args.fabric_mtu,
           netstack=args.netstack, log=_log)
    if args.slurm:
        from rdmaprov.lab import slurm  # only `up --slurm` needs it

        slurm.setup(lab, log=_log)


def _status(args: argparse.Namespace) -> int:
    rows = Lab(args.name).status()
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"lab {args.name!r} is not up")
    else:
        print(f"{'node':8} {'address':16} {'running':8} ssh")
        for r in rows:
            print(f"{r['node']:8} {r['address']:16} {'yes' if r['running'] else 'no':8} "
                  f"{'yes' if r['ssh'] else 'no'}")
    healthy = bool(rows) and all(r["running"] and r["ssh"] for r in rows)
    return 0 if healthy else 2


def _down(args: argparse.Namespace) -> int:
    Lab(args.name).down(log=_log)
    return 0


def _restart(args: argparse.Namespace) -> int:
    lab = Lab(args.name)
    for node in args.node:
        lab.restart(node, log=_log)
    return 0


def _exec(args: argparse.Namespace) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    proc = Lab(args.name).exec(args.node, argv, check=False)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode
