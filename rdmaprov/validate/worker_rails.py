"""The worker's rail round: ib_write_bw per rail-aligned HCA port pair (rounds.rail_plan), run
by the worker's own processes after the sweep.

Standard library only; copied beside worker.py (rdmaprov.validate.slurm.worker_files()).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # from the rdmaprov package (tests, python -m)
    from . import worker_base as base
else:  # a file beside worker.py on a host or in an image, where rdmaprov is not installed
    import worker_base as base

# --- the rail round: ib_write_bw per rail-aligned HCA port pair --------------------------------
# rounds.rail_plan decides who meets whom (the one plan); here the same processes run it. Each
# host's first rank takes part (one ib_write_bw per rail, not per GPU); every other rank only
# joins the collectives, so all ranks make the same calls in the same order. A round: the
# servers start and listen, a barrier, the clients run (all rails of a pair at once, each on its
# own TCP port), and the clients' outputs are gathered so that the server side keeps the same
# figure under its own HCA's name: a rail's ib_write_bw figure is the figure of both its ends.
# Each end keeps every figure it took part in, one file per rail and round (rounds.rail_file:
# <hca>.port<N>.round<R>.log); the summary names each round's two ends (hostnames and node
# ranks), so the judge weighs each end against all its partners (verdict.rail_blame).

_RAIL_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")  # what the judge reads back (judge._RAIL_FILE)
RAIL_START_S = 15.0  # a server not listening by then: its client fails, and its output says so
RAIL_GRACE_S = 30.0  # past -D: connection, memory registration, CUDA init (--use_cuda)
RAIL_EXIT = "rdmaprov: ib_write_bw exit status"  # the last line of a rail's output (the judge's)
RAIL_TEXT_MAX = 16000  # characters of one rail's output gathered (its table is at the end)


def _reach_addr(args: argparse.Namespace) -> str:
    """This host's address as its peers reach it: the source address of the route towards the
    rendezvous host (a UDP connect sends nothing). The rendezvous host gets its own address."""
    master = args.master_addr or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    port = args.master_port or int(os.environ.get("MASTER_PORT") or 29500)
    family = socket.AF_INET6 if ":" in master else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((master, port))
        return str(s.getsockname()[0])


def _listening(port: int) -> bool:
    """Is a TCP socket of this network namespace listening on ``port`` (/proc/net/tcp{,6})?"""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 3 and cols[3] == "0A" and cols[1].rsplit(":", 1)[-1] == f"{port:04X}":
                return True
    return False


def roce_gid_index(hca: str, port: int, root: str | None = None) -> int | None:
    """The GID index ib_write_bw needs (-x) on a RoCE port (rdma_ports.roce_gid_index)."""
    return base._ports().roce_gid_index(root or base._SYS_IB, hca, port)


def _start(argv: list[str], out: str) -> tuple[Any, Any] | None:
    """Start one ib_write_bw, its output in the file ``out``: (process, file), or None when it
    cannot start (the reason is then in the file)."""
    import subprocess

    f = open(out, "w")  # noqa: SIM115 (closed by _finish)
    f.write("rdmaprov: " + " ".join(argv) + "\n")
    f.flush()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        f.write(f"{RAIL_EXIT} not started: {base.one_line(exc)}\n")
        f.close()
        return None
    return proc, f


def _finish(started: tuple[Any, Any] | None, deadline: float) -> int | None:
    """Wait for a started ib_write_bw until ``deadline`` (monotonic), kill it past that. Its
    exit code; None when it never started or had to be killed (written into its output)."""
    import signal
    import subprocess

    if started is None:
        return None
    proc, f = started
    try:
        rc = int(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
        # The judge reads this line: a rail whose ib_write_bw failed is never a pass, whatever
        # its output holds.
        f.write(f"\n{RAIL_EXIT} {rc}\n")
        return rc
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        f.write(f"\n{RAIL_EXIT} killed: no end within its time (the peer never came, or hung)\n")
        return None
    finally:
        f.close()


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-RAIL_TEXT_MAX:]
    except OSError as exc:
        return f"rdmaprov: cannot read {path}: {base.one_line(exc)}\n"


def rail_round(ctx: base._Ctx, args: argparse.Namespace, ranks: list[dict[str, Any]],
               rails_dir: str) -> dict[str, Any]:
    """Run rounds.rail_plan's rounds (<= 2) and leave, in ``rails_dir`` on each host, one
    ``<hca>.port<N>.round<R>.log`` per rail and round it took part in (rounds.rail_file: the
    client's ib_write_bw output on both ends, the judge's figure) or a ``skipped`` file with the
    plan's reason. Returns the summary for the document."""
    R = base._rounds()
    hosts, host_ranks, hostname = base._hosts_of(ranks)
    first = {h: min(rs) for h, rs in host_ranks.items()}
    by_rank = {int(r["rank"]): r for r in ranks}
    ports = {h: (by_rank[first[h]].get("preflight") or {}).get("ports") for h in hosts}
    plan = R.rail_plan(hosts, ports)
    me = f"node{base._node_rank(ctx)}"
    lead = ctx.rank == first.get(me)
    if lead:
        os.makedirs(rails_dir, exist_ok=True)
        if me in plan.skipped:
            with open(os.path.join(rails_dir, "skipped"), "w") as f:
                f.write(plan.skipped[me] + "\n")
    summary: dict[str, Any] = {
        "ran": bool(plan.rounds), "rounds": len(plan.rounds), "rails": [],
        "skipped": {hostname[h]: why for h, why in plan.skipped.items()}}
    if not plan.rounds:
        return summary
    base.progress("rail round: addresses")
    mine, why = "", ""
    if lead:
        try:
            mine = _reach_addr(args)
        except (OSError, ValueError) as exc:  # no route: the clients of this server say so
            why = base.one_line(exc)
    known = base._gather_json(ctx, {"node": me, "addr": mine, "why": why})
    addr = {e["node"]: e["addr"] for e in known if e.get("addr")}
    no_addr = {e["node"]: e["why"] for e in known if e.get("why")}
    cuda = ctx.local_rank if args.rail_cuda and ctx.backend == "nccl" else None
    for number, pairs in enumerate(plan.rounds, 1):
        base.progress(f"rail round {number}: {len(pairs)} host pairs")
        serve = next((p for p in pairs if p.server == me), None) if lead else None
        call = next((p for p in pairs if p.client == me), None) if lead else None
        servers = []
        if serve is not None:
            for k, (_, (hca, port)) in enumerate(serve.rails):
                if not _RAIL_NAME.match(hca):
                    continue
                argv = R.rail_argv(hca, port, k, cuda_device=cuda,
                                   gid_index=roce_gid_index(hca, port))
                out = os.path.join(rails_dir, f"{hca}.port{int(port)}.round{number}.server")
                servers.append((k, hca, port, _start(argv, out)))
            until = time.monotonic() + RAIL_START_S
            while time.monotonic() < until and not all(
                    s is None or s[0].poll() is not None or _listening(R.RAIL_BASE_PORT + k)
                    for k, _, _, s in servers):
                time.sleep(0.1)
        base.progress(f"rail round {number}: barrier")
        ctx.dist.barrier()  # every server of the round listens (or has failed) before a client
        done: list[dict[str, Any]] = []
        if call is not None:
            base.progress(f"rail round {number}: clients")
            clients: list[tuple[int, str, int, str, int, str, float, Any]] = []
            for k, ((hca, port), (peer_hca, peer_port)) in enumerate(call.rails):
                if not _RAIL_NAME.match(hca) or not _RAIL_NAME.match(peer_hca):
                    continue
                out = os.path.join(rails_dir, R.rail_file(hca, port, number))
                t0 = time.monotonic()
                server_addr = addr.get(call.server)
                if not server_addr:  # never a default address: it could reach a local server
                    with open(out, "w") as f:
                        f.write(f"{RAIL_EXIT} not started: no address for "
                                f"{hostname[call.server]} (its route to the rendezvous host: "
                                f"{no_addr.get(call.server) or 'unknown'})\n")
                    clients.append((k, hca, port, peer_hca, peer_port, out, t0, None))
                    continue
                argv = R.rail_argv(hca, port, k, server_addr=server_addr, cuda_device=cuda,
                                   gid_index=roce_gid_index(hca, port))
                clients.append((k, hca, port, peer_hca, peer_port, out, t0, _start(argv, out)))
            until = time.monotonic() + R.RAIL_SECONDS + RAIL_GRACE_S
            for k, hca, port, peer_hca, peer_port, out, t0, started in clients:
                rc = _finish(started, until)
                done.append({"round": number, "rail": k, "client": hostname[me],
                             "server": hostname[call.server], "node": me,
                             "server_node": call.server,
                             # node ranks (client, server): the judge's inventory names
                             "nodes": [int(me[4:]), int(call.server[4:])],
                             "client_port": f"{hca}:{port}",
                             "server_port": f"{peer_hca}:{peer_port}",
                             "rc": rc, "seconds": round(time.monotonic() - t0, 3),
                             "text": _tail(out)})
        base.progress(f"rail round {number}: servers end")
        # The server side: its own processes end with their client (or are killed), and it
        # keeps the client's output under its own HCA's name and the round's (a host is in one
        # pair a round, so this never meets a file of its own client's).
        until = time.monotonic() + R.RAIL_SECONDS + RAIL_GRACE_S
        for _, _, _, started in servers:
            _finish(started, until)
        got = [e for g in base._gather_json(ctx, {"rails": done}) for e in g.get("rails", [])]
        if serve is not None:
            for k, hca, port, _ in servers:
                e = next((e for e in got if e["node"] == serve.client and e["rail"] == k), None)
                path = os.path.join(rails_dir, R.rail_file(hca, port, number))
                with open(path, "w") as f:
                    f.write(f"rdmaprov: server side of the rail {serve.rails[k][0][0]}:"
                            f"{serve.rails[k][0][1]} on {hostname[serve.client]} -> "
                            f"{hca}:{port} here; the client's output follows\n")
                    f.write(e["text"] if e else "rdmaprov: no output from the client\n")
        summary["rails"] += [{k: v for k, v in e.items() if k not in ("text", "node",
                                                                       "server_node")}
                             for e in got]
    return summary
