"""Pairwise rounds: when the whole fabric is slow, find the host to blame.

A fabric all_reduce is as slow as its slowest link, so its figure names no host. Two rounds of
two-host runs do: round 1 pairs neighbours (0-1, 2-3, ...), round 2 shifts by one (1-2, 3-4,
..., last-0), so every host meets two different partners and all pairs of a round run at once
(each pair is its own torchrun). A host whose every pair failed is to blame; a host with one
failed pair is cleared if its partner in that pair failed everywhere too. Cost: two short runs
whatever the fleet's size, instead of n-1 rounds for every pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Pair = tuple[str, str]


def pair_rounds(hosts: Sequence[str]) -> list[list[Pair]]:
    """Two rounds of disjoint pairs covering every host at least once per round.

    With an odd count the host left over in a round is paired with a host from that round's
    first pair again (it then runs twice in that round, one after the other)."""
    hosts = list(dict.fromkeys(hosts))
    n = len(hosts)
    if n < 2:
        return []
    if n == 2:
        return [[(hosts[0], hosts[1])]]
    rounds = []
    for shift in (0, 1):
        ring = hosts[shift:] + hosts[:shift]
        pairs = [(ring[i], ring[i + 1]) for i in range(0, n - 1, 2)]
        if n % 2:
            pairs.append((ring[-1], ring[0]))
        rounds.append(pairs)
    return rounds


@dataclass
class Blame:
    to_blame: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


def blame(results: Mapping[Pair, bool]) -> Blame:
    """``results``: for each pair run, whether it passed (its verdict). Who is to blame?"""
    seen: dict[str, list[tuple[str, bool]]] = {}
    for (a, b), ok in results.items():
        seen.setdefault(a, []).append((b, ok))
        seen.setdefault(b, []).append((a, ok))
    bad = {h for h, runs in seen.items()
           if len({p for p, _ in runs}) >= 2 and not any(ok for _, ok in runs)}
    out = Blame()
    for host in sorted(seen):
        runs = seen[host]
        failed = sorted(p for p, ok in runs if not ok)
        if host in bad:
            out.to_blame.append(host)
            out.reasons[host] = f"failed with every partner ({', '.join(failed)})"
        elif not failed:
            out.cleared.append(host)
        elif all(p in bad for p in failed):
            out.cleared.append(host)
            out.reasons[host] = f"its failed pair(s) were with {', '.join(failed)}, to blame"
        else:
            out.inconclusive.append(host)
            out.reasons[host] = (f"failed with {', '.join(failed)}, which passed elsewhere "
                                 "or met no one else: the link between them, or too few pairs")
    return out
