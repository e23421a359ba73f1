"""The worker's rendezvous in recorded phases, so that a run that never got going names the host
that never joined and the path it tried (issue 38).

Phases, each one step of the watchdog's (worker_base.progress) and one field of the record:

1. ``store connect``: this rank's TCP connect attempts to the rendezvous store (MASTER_ADDR:
   MASTER_PORT), from the source address and interface its route picks, each attempt's outcome
   counted (timed out: the path drops; refused: nothing listens or a firewall rejects), bounded
   by join_limit().
2. ``join``: every rank sets its key in the store (its node, host name, source address,
   interface) and waits, bounded by the same limit, until every rank has; a rank still missing
   then is named by every rank that joined (rank 0's store knows which ranks connected).
3. ``fabric path``: the first local rank of each node listens on the address its backend will
   use (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME when it names one interface, else the route to
   the rendezvous) and dials the next PATH_PEERS nodes' listeners, each connect bounded by
   PATH_CONNECT_S; every node's outcomes go through the store, so every rank ends with the same
   matrix, and a failed pair ends the run at once instead of in a hung NCCL/gloo bootstrap.
4. ``backend bootstrap`` (init_process_group on that store) and the ``first collective``: the
   worker's own phases.

A rank that fails raises RendezvousFailed with its record, which the worker prints in its JSON
document (rdmaprov/validate/rendezvous.py judges those documents). Standard library only:
copied beside worker.py (rdmaprov.validate.slurm.worker_files()).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import struct
import threading
import time
from typing import Any

# Bound on the store connect and the join together: the launch starts every host at once, so
# a rank that has not joined a minute after this one started waiting will not (Python and
# `import torch` of every rank are behind them by then; a slower start is named with its phase).
JOIN_S = 60.0
PATH_CONNECT_S = 5.0  # one connect of the fabric path probe: a LAN answers in milliseconds
PATH_PEERS = 2  # nodes each node dials (the next ones on the ring): each node meets 4 partners
ATTEMPT_S = 3.0  # one store connect attempt
POLL_S = 0.2

KEY = "rdmaprov/rdzv"


class RendezvousFailed(RuntimeError):
    """The rendezvous did not complete; ``record`` says how far this rank got, and why."""

    def __init__(self, message: str, record: dict[str, Any]) -> None:
        super().__init__(message)
        self.record = record


def join_limit(timeout: float) -> float:
    """Seconds the store connect and the join may take together: --timeout, at most JOIN_S."""
    return max(1.0, min(float(timeout), JOIN_S))


# --- where a packet to an address leaves from ---------------------------------------------------

_SIOCGIFADDR = 0x8915


def interface_address(name: str) -> str | None:
    """The IPv4 address of the interface ``name``, or None (no such interface, no address)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        packed = struct.pack("256s", name.encode()[:15])
        return socket.inet_ntoa(fcntl.ioctl(s.fileno(), _SIOCGIFADDR, packed)[20:24])
    return None


def interface_of(address: str) -> str | None:
    """The interface holding the IPv4 ``address``, or None."""
    with contextlib.suppress(OSError):
        for _, name in socket.if_nameindex():
            if interface_address(name) == address:
                return name
    return None


def route_source(address: str, port: int) -> str | None:
    """The source address this host's routing picks toward ``address`` (a UDP connect, which
    sends nothing), or None when there is no route."""
    with contextlib.suppress(OSError):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((address, port))
            return str(s.getsockname()[0])
    return None


def backend_address(backend: str, master: str, port: int) -> tuple[str | None, str | None, str]:
    """(address, interface, how it was chosen) that this host's backend bootstrap will use: the
    interface GLOO_SOCKET_IFNAME (gloo) or NCCL_SOCKET_IFNAME (nccl) names when it names one
    interface by its name, else the route to the rendezvous (what both pick without one)."""
    var = "GLOO_SOCKET_IFNAME" if backend == "gloo" else "NCCL_SOCKET_IFNAME"
    spec = os.environ.get(var, "").strip().lstrip("=")
    if spec and "," not in spec and not spec.startswith("^"):
        addr = interface_address(spec)
        if addr:
            return addr, spec, f"{var}={spec}"
    src = route_source(master, port)
    return src, interface_of(src) if src else None, f"the route to {master}"


# --- one connect, its outcome in words ----------------------------------------------------------

def outcome(exc: BaseException | None) -> str:
    """'ok', 'timed out', 'refused', 'no route to host', 'network unreachable' or the error."""
    if exc is None:
        return "ok"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    code = getattr(exc, "errno", None)
    named = {errno.ECONNREFUSED: "refused", errno.EHOSTUNREACH: "no route to host",
             errno.ENETUNREACH: "network unreachable", errno.ECONNRESET: "reset"}
    if code in named:
        return named[code]
    return getattr(exc, "strerror", None) or type(exc).__name__


def dial(address: str, port: int, limit: float, source: str | None = None
         ) -> tuple[str, str | None]:
    """One TCP connect, closed at once: (outcome, the local address it left from)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(limit)
        try:
            if source:
                s.bind((source, 0))
            s.connect((address, port))
        except OSError as exc:
            with contextlib.suppress(OSError):
                return outcome(exc), str(s.getsockname()[0])
            return outcome(exc), None
        return "ok", str(s.getsockname()[0])


def own_unreachable(outcomes: dict[str, int]) -> bool:
    """This host has no route to its peers' network at all (ENETUNREACH, found before any
    packet leaves): its own failure, not a peer's."""
    return bool(outcomes.get("network unreachable")) and not outcomes.get("ok")


# --- the phases ---------------------------------------------------------------------------------

def _now(t0: float) -> float:
    return round(time.monotonic() - t0, 3)


def connect_store(torch: Any, record: dict[str, Any], rank: int, world: int, master: str,
                  port: int, timeout: float, agent_store: bool, progress: Any) -> Any:
    """The store, after this rank's own connect attempts reached it (recorded), or
    RendezvousFailed: every attempt failed until join_limit."""
    dist = torch.distributed
    t0 = time.monotonic()
    deadline = t0 + join_limit(timeout)
    src = route_source(master, port)
    record.update({"phase": "store connect", "address": f"{master}:{port}", "source": src,
                   "interface": interface_of(src) if src else None, "attempts": {}})
    progress(f"store connect to {master}:{port} from {src or '?'} "
             f"({record['interface'] or 'no route'})")
    server = None
    if rank == 0 and not agent_store:  # rank 0 hosts the store (the direct launcher)
        server = dist.TCPStore(master, port, world, True, _dt.timedelta(seconds=timeout),
                               wait_for_workers=False, multi_tenant=True,
                               use_libuv=os.environ.get("USE_LIBUV", "1") == "1")
        port = int(server.port)  # the port it listens on (0 asks for a free one)
        record["address"] = f"{master}:{port}"
    attempts: dict[str, int] = record["attempts"]
    while True:
        left = deadline - time.monotonic()
        result, local = dial(master, port, max(0.1, min(ATTEMPT_S, left)))
        attempts[result] = attempts.get(result, 0) + 1
        if local and local != "0.0.0.0":
            record["source"] = local
        if result == "ok":
            break
        if own_unreachable(attempts):
            record["error"] = "network unreachable"
            raise RendezvousFailed(
                f"Network is unreachable: no route from this host to the rendezvous at "
                f"{master}:{port}", record)
        if time.monotonic() >= deadline:
            record["elapsed_s"] = _now(t0)
            said = ", ".join(f"{n} {k}" for k, n in sorted(attempts.items()))
            raise RendezvousFailed(
                f"could not connect to the rendezvous at {master}:{port} from "
                f"{record['source'] or '?'} ({record['interface'] or '?'}) in "
                f"{join_limit(timeout):.0f} s: {sum(attempts.values())} attempts ({said})",
                record)
        if result != "timed out":
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    if server is not None:
        store = server
    else:
        left = max(1.0, deadline - time.monotonic())
        store = dist.TCPStore(master, port, world, False, _dt.timedelta(seconds=left))
        store.set_timeout(_dt.timedelta(seconds=timeout))
    record["connected_s"] = _now(t0)
    return store


def _get_json(store: Any, key: str) -> Any:
    return json.loads(store.get(key).decode())


def _wait_keys(store: Any, keys: list[str], deadline: float) -> list[str]:
    """The keys still missing at ``deadline`` (polled; [] as soon as all are there)."""
    missing = list(keys)
    while True:
        missing = [k for k in missing if not store.check([k])]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(POLL_S)


def join(store: Any, record: dict[str, Any], rank: int, world: int, node: int, hostname: str,
         timeout: float, progress: Any) -> dict[int, dict[str, Any]]:
    """Set this rank's key, wait for every rank's: {rank: its join entry}."""
    t0 = time.monotonic()
    record["phase"] = "join"
    progress("join: waiting for every rank in the store")
    store.set(f"{KEY}/joined/{rank}", json.dumps(
        {"node": node, "hostname": hostname, "source": record.get("source"),
         "interface": record.get("interface")}))
    keys = [f"{KEY}/joined/{r}" for r in range(world)]
    missing = _wait_keys(store, keys, t0 + join_limit(timeout))
    joined = {r: _get_json(store, k) for r, k in enumerate(keys) if k not in missing}
    record["joined"] = {str(r): e for r, e in joined.items()}
    if missing:
        ranks = sorted(int(k.rsplit("/", 1)[1]) for k in missing)
        record["missing"] = ranks
        raise RendezvousFailed(
            f"rank(s) {', '.join(map(str, ranks))} never joined the rendezvous at "
            f"{record['address']} within {join_limit(timeout):.0f} s "
            f"({len(joined)}/{world} joined)", record)
    return joined


def _accept_all(listener: socket.socket, stop: threading.Event) -> None:
    listener.settimeout(0.2)
    while not stop.is_set():
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            conn.close()


def fabric_path(store: Any, record: dict[str, Any], backend: str, master: str, port: int,
                node: int, rank: int, joined: dict[int, dict[str, Any]], timeout: float,
                progress: Any) -> None:
    """Each node's first rank (its lowest) dials the next PATH_PEERS nodes on its backend's
    address; every rank reads every node's outcomes; RendezvousFailed when a pair did not
    connect."""
    nodes = sorted({int(e["node"]) for e in joined.values()})
    first = min(r for r, e in joined.items() if int(e["node"]) == node) == rank
    record["phase"] = "fabric path"
    record["path"] = {}
    mine = record["path"]
    listener = None
    stop = threading.Event()
    limit = join_limit(timeout)
    if first:
        addr, ifname, how = backend_address(backend, master, port)
        mine.update({"address": addr, "interface": ifname, "chosen_by": how})
        progress(f"fabric path: {backend} from {addr or '?'} ({ifname or '?'}, {how})")
        if addr:
            listener = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
            listener.bind((addr, 0))
            listener.listen(64)
            threading.Thread(target=_accept_all, args=(listener, stop), daemon=True).start()
            mine["port"] = listener.getsockname()[1]
        store.set(f"{KEY}/path/{node}", json.dumps(mine))
    else:
        progress("fabric path: waiting for this node's first rank")
    try:
        missing = _wait_keys(store, [f"{KEY}/path/{n}" for n in nodes], time.monotonic() + limit)
        if missing:
            raise RendezvousFailed(f"no fabric path address from {', '.join(missing)}", record)
        if first:
            mine["dialed"] = {}
            i = nodes.index(node)
            peers = [nodes[(i + k) % len(nodes)] for k in range(1, PATH_PEERS + 1)]
            peers = sorted({p for p in peers if p != node})
            results: dict[int, tuple[str, str | None]] = {}

            def one(peer: int) -> None:
                there = _get_json(store, f"{KEY}/path/{peer}")
                if not there.get("address") or not there.get("port"):
                    results[peer] = ("no address", None)
                    return
                results[peer] = dial(there["address"], int(there["port"]), PATH_CONNECT_S,
                                     mine.get("address"))

            threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in peers]
            for t in threads:
                t.start()
            for t in threads:
                t.join(PATH_CONNECT_S + 5)
            for p in peers:
                got = results.get(p, ("timed out", None))[0]
                mine["dialed"][str(p)] = got
            counts: dict[str, int] = {}
            for v in mine["dialed"].values():
                counts[v] = counts.get(v, 0) + 1
            if own_unreachable(counts):
                raise RendezvousFailed(
                    f"Network is unreachable: no route from {mine.get('address')} "
                    f"({mine.get('interface')}) to the other nodes' fabric addresses", record)
            store.set(f"{KEY}/pathres/{node}", json.dumps(mine["dialed"]))
        keys = [f"{KEY}/pathres/{n}" for n in nodes]
        missing = _wait_keys(store, keys, time.monotonic() + limit)
        matrix = {str(n): _get_json(store, f"{KEY}/pathres/{n}") for n in nodes
                  if f"{KEY}/pathres/{n}" not in missing}
        record["matrix"] = matrix
        record["addresses"] = {str(n): {k: v for k, v in
                                        _get_json(store, f"{KEY}/path/{n}").items()
                                        if k in ("address", "interface")} for n in nodes}
        name = {str(e["node"]): str(e.get("hostname") or f"node index {e['node']}")
                for e in joined.values()}
        failed = sorted(f"{name.get(a, a)} -> {name.get(b, b)} {how}"
                        for a, row in matrix.items() for b, how in row.items() if how != "ok")
        if missing or failed:
            if missing:
                record["missing_path"] = [int(k.rsplit("/", 1)[1]) for k in missing]
            raise RendezvousFailed("fabric path probe failed: " + "; ".join(
                failed + [f"no outcome from {name.get(str(n), n)}"
                          for n in record.get("missing_path", [])]),
                record)
        # Everyone has dialed (every outcome is in): the listeners may go.
    finally:
        stop.set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.close()
