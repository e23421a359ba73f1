"""Who never joined, and over which path: the one rule that reads the workers' rendezvous
records (rdmaprov/validate/worker_join.py) of a run that never got going, and names the host to
fix, while the hosts that only waited for it are named as waiting, never blamed.

Input: each host's own worker document (its result.json: a failed rendezvous leaves one on every
node, with ``rendezvous``: the phase it reached, the store address, its source address and
interface, each connect attempt's outcome, and past the join the fabric path matrix). Node i is
the run's host i (the launch gives host i node rank i).

The rule:

- **fabric path**: every node dialed its next nodes on its backend's address. A node whose every
  tested pair failed, while some pair of the other nodes connected, is cut off the fabric (FAIL,
  drained); the others waited for it. With two nodes, or failures no single node explains, the
  hosts of the failed pairs are named without blame (either end's path may be the cause).
- **join**: the ranks that never set their key in the store. When the rendezvous host and some
  other host joined, the missing host never reached the rendezvous (FAIL; drained when its own
  record shows its connect attempts failing, which names its path); when no other host joined
  and three or more were asked, the rendezvous host is the one cut off (every other host's
  connect attempts failed). Two hosts: either end's path, no blame.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """One host's part in a failed rendezvous."""

    status: str  # "fail": the host to fix; "wait": it waited for another; "unclear": no blame
    line: str
    drain: bool = False  # the verdict names this host's own path: a scheduler may drain it


def _record(doc: Any) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        return None
    rec = doc.get("rendezvous")
    return rec if isinstance(rec, dict) else None


def _attempts(rec: Mapping[str, Any]) -> str:
    """'3 connect attempts timed out', '2 timed out, 1 refused'."""
    tries = {str(k): int(v) for k, v in (rec.get("attempts") or {}).items()
             if isinstance(v, int) and k != "ok"}
    if not tries:
        return "its connect attempts failed"
    total = sum(tries.values())
    if len(tries) == 1:
        [(how, _)] = tries.items()
        verb = {"refused": "were refused"}.get(how, how)
        return f"its {total} connect attempt{'s' if total > 1 else ''} {verb}"
    return "its connect attempts: " + ", ".join(f"{n} {k}" for k, n in sorted(tries.items()))


def _cause(outcomes: set[str], who: str, to: str) -> str:
    if outcomes == {"timed out"}:
        return f"the fabric path from {who} to {to} drops"
    if outcomes == {"refused"}:
        return f"nothing accepts {who}'s connections on {to} (a firewall rejects them)"
    return f"the path from {who} to {to} fails"


def _via(rec: Mapping[str, Any] | None) -> str:
    if not rec:
        return ""
    iface, src = rec.get("interface"), rec.get("source")
    if iface and src:
        return f" over {iface} ({src})"
    return f" over {iface or src}" if iface or src else ""


def _last_step(steps: str | None) -> str | None:
    last = None
    for line in (steps or "").splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1].startswith("rank") and not parts[2].startswith("exit "):
            last = parts[2].strip()
    return last


def blame(hosts: list[str], docs: Mapping[str, Any], nproc: int = 1,
          steps: Mapping[str, str | None] | None = None) -> dict[str, Verdict]:
    """{host: Verdict} for every host of a run whose rendezvous failed; {} when no worker's
    record shows one."""
    recs = {h: _record(docs.get(h)) for h in hosts}
    failed = {h: r for h, r in recs.items()
              if r is not None and r.get("phase") in ("store connect", "join", "fabric path")}
    if not failed:
        return {}
    matrix = next((r["matrix"] for r in (recs.get(hosts[0]), *recs.values())
                   if r and isinstance(r.get("matrix"), dict)), None)
    if matrix is not None:
        return _path_blame(hosts, matrix, recs)
    return _join_blame(hosts, recs, nproc, steps or {})


def _path_blame(hosts: list[str], matrix: Mapping[str, Any],
                recs: Mapping[str, dict[str, Any] | None]) -> dict[str, Verdict]:
    def host(n: Any) -> str | None:
        i = int(n) if str(n).isdecimal() else -1
        return hosts[i] if 0 <= i < len(hosts) else None

    pairs: dict[frozenset[str], set[str]] = {}  # tested pair -> outcomes, both directions
    for a, row in matrix.items():
        for b, how in (row or {}).items():
            ha, hb = host(a), host(b)
            if ha and hb and ha != hb:
                pairs.setdefault(frozenset((ha, hb)), set()).add(str(how))
    bad = {p: o - {"ok"} for p, o in pairs.items() if o != {"ok"}}
    if not bad:
        return {}
    addresses: dict[str, Any] = next((r["addresses"] for r in recs.values()
                                      if r and isinstance(r.get("addresses"), dict)), {})

    def via(h: str) -> str:
        a = addresses.get(str(hosts.index(h))) or {}
        return _via({"interface": a.get("interface"), "source": a.get("address")})

    cut = {h for h in hosts if any(h in p for p in pairs)
           and all(p in bad for p in pairs if h in p)}
    healthy_pair = any(p not in bad and not (p & cut) for p in pairs)
    explained = all(p & cut for p in bad)
    out: dict[str, Verdict] = {}
    if cut and healthy_pair and explained:
        for h in hosts:
            if h in cut:
                peers = sorted((set().union(*(p for p in pairs if h in p)) - {h}),
                               key=hosts.index)
                how = set().union(*(bad[p] for p in pairs if h in p))
                others = sorted(set(hosts) - cut, key=hosts.index)
                out[h] = Verdict("fail", (
                    f"cut off the fabric: its connects{via(h)} to {', '.join(peers)} and "
                    f"theirs to it {'/'.join(sorted(how))}, while {', '.join(others)} reach "
                    f"each other ({_cause(how, h, 'its peers')})"), drain=True)
            else:
                gone = sorted((h2 for p in bad if h in p for h2 in p if h2 != h),
                              key=hosts.index) or sorted(cut, key=hosts.index)
                out[h] = Verdict("wait", f"waiting: {', '.join(gone)} cut off the fabric "
                                         f"(this host's other paths connected)")
        return out
    for h in hosts:
        mine = [p for p in bad if h in p]
        if mine:
            said = "; ".join(f"no path{via(h)} with {next(iter(p - {h}))} "
                             f"({'/'.join(sorted(bad[p]))})" for p in
                             sorted(mine, key=lambda p: sorted(map(hosts.index, p))))
            out[h] = Verdict("unclear", f"{said}: either end's path may be the cause")
        else:
            out[h] = Verdict("wait", "waiting: fabric paths between other hosts failed")
    return out


def _join_blame(hosts: list[str], recs: Mapping[str, dict[str, Any] | None], nproc: int,
                steps: Mapping[str, str | None]) -> dict[str, Verdict]:
    nproc = max(1, nproc)
    lists = [r for r in (recs.get(hosts[0]), *recs.values())
             if r and isinstance(r.get("missing"), list)]
    if lists:
        missing_ranks = [int(x) for x in lists[0]["missing"] if isinstance(x, int)]
    else:  # no host joined at all: every one that left a record failed its connect
        missing_ranks = [i * nproc for i, h in enumerate(hosts)
                         if (recs.get(h) or {}).get("phase") == "store connect"]
    missing = sorted({hosts[r // nproc] for r in missing_ranks if 0 <= r // nproc < len(hosts)},
                     key=hosts.index)
    if not missing:
        return {}
    master = hosts[0]
    joined = [h for h in hosts if h not in missing]
    address = next((r.get("address") for r in recs.values() if r and r.get("address")),
                   "the rendezvous")
    out: dict[str, Verdict] = {}
    others_failed = [h for h in hosts[1:] if (recs.get(h) or {}).get("phase") == "store connect"
                     and (recs.get(h) or {}).get("attempts")]
    if master in joined and len(joined) == 1 and len(hosts) >= 3 \
            and len(others_failed) == len(hosts) - 1:
        # Nobody reached the rendezvous host's store: it is the one cut off.
        out[master] = Verdict("fail", (
            f"no other host reached the rendezvous at {address} that this host holds: each "
            f"one's connect attempts failed "
            f"({_cause(_outcomes(recs, others_failed), 'them', master)})"),
            drain=True)
        for h in hosts[1:]:
            out[h] = Verdict("wait", f"waiting: could not reach the rendezvous host {master} at "
                                     f"{address}{_via(recs.get(h))} ({_attempts(recs[h] or {})})")
        return out
    sure = master in joined and len(joined) >= 2
    for h in hosts:
        rec = recs.get(h)
        if h in missing:
            if rec and rec.get("phase") == "store connect" and rec.get("attempts"):
                line = (f"never joined the rendezvous at {rec.get('address') or address}"
                        f"{_via(rec)} ({_attempts(rec)}: "
                        f"{_cause(_outcomes(recs, [h]), h, master)})")
            else:
                last = _last_step(steps.get(h))
                line = (f"never joined the rendezvous at {address}"
                        + (f": its worker's last step was '{last}'" if last else
                           ": its worker left no record of getting there"))
            if not sure:
                line += f"; with {len(hosts)} hosts, {master}'s path may be the cause as well"
            out[h] = Verdict("fail" if sure else "unclear", line,
                             drain=sure and bool(rec and rec.get("attempts")))
        else:
            out[h] = Verdict("wait", f"waiting: {', '.join(missing)} did not join the rendezvous")
    return out


def _outcomes(recs: Mapping[str, dict[str, Any] | None], who: list[str]) -> set[str]:
    out: set[str] = set()
    for h in who:
        out |= {str(k) for k in ((recs.get(h) or {}).get("attempts") or {}) if k != "ok"}
    return out
