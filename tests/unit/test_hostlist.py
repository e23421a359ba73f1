"""Host names folded as Slurm and ClusterShell write them (node[1-3]), and read back."""

from __future__ import annotations

import random

import pytest

from rdmaprov.hostlist import expand, fold


@pytest.mark.parametrize("names, folded", [
    (["node1", "node2", "node3"], "node[1-3]"),
    (["node3", "node1", "node2"], "node[1-3]"),  # any order in, name order out
    (["node1"], "node1"),
    (["node1", "node3"], "node[1,3]"),
    (["node1", "node2", "node3", "node7", "node9", "node10", "node11"], "node[1-3,7,9-11]"),
    (["gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04"], "gpu-a[01-04]"),
    # Zero padding keeps its width; a number of that width without a zero shares it.
    ([f"node{i:02d}" for i in range(1, 11)], "node[01-10]"),
    (["node01", "node10"], "node[01,10]"),
    (["node9", "node10"], "node[9-10]"),
    (["node008", "node009", "node010", "node011"], "node[008-011]"),
    # Two widths of one prefix are two ranges, never one that reads back wrong.
    (["node1", "node2", "node01"], "node[01,1-2]"),
    # Mixed sets: each prefix once, in name order.
    (["node2", "gpu-a02", "node1", "login", "gpu-a01", "node3"], "gpu-a[01-02],login,node[1-3]"),
    (["rack1-node1", "rack1-node2", "rack2-node1"], "rack1-node[1-2],rack2-node1"),
    # A number in the middle: the suffix is kept.
    (["node1-ib", "node2-ib", "node1"], "node1,node[1-2]-ib"),
    # Names without numbers, FQDNs, duplicates.
    (["login", "head", "login"], "head,login"),
    (["gpu1.example.org", "gpu2.example.org"], "gpu[1-2].example.org"),
    (["10.0.0.1", "10.0.0.2", "10.0.0.3"], "10.0.0.[1-3]"),
    ([], ""),
])
def test_fold(names: list[str], folded: str) -> None:
    assert fold(names) == folded
    assert sorted(expand(folded)) == sorted(set(names))


def test_a_name_that_would_not_read_back_is_left_as_it_is() -> None:
    assert fold(["node[1]", "a,b", "node2"]) == "a,b,node2,node[1]"


def test_fold_and_expand_agree_on_a_fleet() -> None:
    rng = random.Random(7)
    names = {f"gpu-{rack}{n:03d}" for rack in "ab" for n in range(1, 400) if rng.random() < 0.9}
    names |= {f"cpu{n}" for n in range(1, 120) if rng.random() < 0.5} | {"login", "head1"}
    folded = fold(names)
    assert sorted(expand(folded)) == sorted(names)
    assert len(folded) < len(",".join(names)) / 4


@pytest.mark.parametrize("bad", ["node[1-3", "node[1-3]x[2]", "node[a-b]"])
def test_expand_refuses_what_is_not_a_hostlist(bad: str) -> None:
    with pytest.raises(ValueError):
        expand(bad)
