"""Pairwise rounds and who is to blame."""

from __future__ import annotations

import itertools

import pytest

from rdmaprov.validate.pairwise import blame, pair_rounds


@pytest.mark.parametrize("n", [3, 4, 5, 8, 9, 16])
def test_rounds_cover_everyone_with_two_partners(n):
    hosts = [f"h{i}" for i in range(n)]
    rounds = pair_rounds(hosts)
    assert len(rounds) == 2
    partners = {h: set() for h in hosts}
    for pairs in rounds:
        assert {h for p in pairs for h in p} == set(hosts)
        for a, b in pairs:
            assert a != b
            partners[a].add(b)
            partners[b].add(a)
    assert all(len(p) >= 2 for p in partners.values())


def test_small_fleets():
    assert pair_rounds(["a"]) == []
    assert pair_rounds(["a", "b"]) == [[("a", "b")]]


def _run(hosts, broken):
    return {p: not (set(p) & broken) for r in pair_rounds(hosts) for p in r}


@pytest.mark.parametrize("n", [4, 5, 8, 9])
def test_one_bad_host_is_named_and_everyone_else_cleared(n):
    hosts = [f"h{i}" for i in range(n)]
    for bad in hosts:
        res = blame(_run(hosts, {bad}))
        assert res.to_blame == [bad]
        assert sorted(res.cleared) == sorted(set(hosts) - {bad})
        assert res.inconclusive == []


def test_two_bad_hosts_far_apart():
    hosts = [f"h{i}" for i in range(8)]
    res = blame(_run(hosts, {"h0", "h4"}))
    assert res.to_blame == ["h0", "h4"]


def test_two_bad_neighbours_in_eight_are_both_found():
    hosts = [f"h{i}" for i in range(8)]
    for a, b in itertools.pairwise(hosts):
        res = blame(_run(hosts, {a, b}))
        assert set(res.to_blame) == {a, b}


def test_a_bad_link_between_two_good_hosts_is_inconclusive_not_blamed():
    results = {("a", "b"): False, ("c", "d"): True, ("b", "c"): True, ("d", "a"): True}
    res = blame(results)
    assert res.to_blame == []
    assert res.inconclusive == ["a", "b"]
    assert "link between them" in res.reasons["a"]
