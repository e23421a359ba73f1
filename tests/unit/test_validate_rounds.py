"""The pair-round planner and the blame rule (rdmaprov/validate/rounds.py), on paper, at fleet
sizes from 2 to 1,024: single and double bad hosts and bad links placed at random."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdmaprov.validate import rounds as R

SIZES = [2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 31, 64, 100, 255, 256, 511, 1000, 1023, 1024]


def hosts(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(n)]


# A healthy pair's busbw and a slow one's, and the bar between them (GB/s).
FAST, SLOW, BAR = 40.0, 4.0, 20.0


def simulate(bad: set[str], bad_links: set[tuple[str, str]] = frozenset()):  # type: ignore[assignment]
    """A pair is slow when one of its hosts is bad or its link is: measure(round, step, pairs)
    gives each pair's busbw, as the worker's does."""
    links = {tuple(sorted(p)) for p in bad_links}

    def measure(number, step_no, step):
        return {p: SLOW if (p[0] in bad or p[1] in bad or tuple(sorted(p)) in links) else FAST
                for p in step}
    return measure


def classify(figures):
    """The worker's rule: slow_pairs against the bar, and against the best pair."""
    return R.slow_pairs(figures, BAR, 0.4)[0]


def run_rounds(hs, measure):
    return R.run_rounds(hs, measure, classify)


@pytest.mark.parametrize("n", SIZES)
def test_rounds_are_disjoint_steps_and_every_host_meets_two_partners(n: int) -> None:
    hs = hosts(n)
    rounds = R.ring_rounds(hs)
    assert len(rounds) == (1 if n == 2 else 2)
    partners: dict[str, set[str]] = {h: set() for h in hs}
    for rnd in rounds:
        assert len(rnd) <= 2  # at most one extra step (odd n)
        for step in rnd:
            busy = [h for p in step for h in p]
            assert len(busy) == len(set(busy)), "a host twice in one step"
            for a, b in step:
                assert a != b
                partners[a].add(b)
                partners[b].add(a)
    want = 1 if n == 2 else 2
    assert all(len(p) == want for p in partners.values())


@pytest.mark.parametrize("n", [n for n in SIZES if n >= 3])
def test_one_bad_host_is_found_in_two_rounds(n: int) -> None:
    rng = random.Random(n)
    hs = hosts(n)
    for bad in {hs[0], hs[-1], hs[n // 2], rng.choice(hs)}:
        done, _, b = run_rounds(hs, simulate({bad}))
        assert list(b.blamed) == [bad], (n, bad)
        assert len(done) == 2 and b.settled and not b.bad_links


@pytest.mark.parametrize("n", [n for n in SIZES if n >= 6])
@pytest.mark.parametrize("gap", [1, 2, 3, None])
def test_two_bad_hosts_are_found_in_three_rounds(n: int, gap: int | None) -> None:
    rng = random.Random(n * 7 + (gap or 0))
    hs = hosts(n)
    i = rng.randrange(n)
    j = (i + gap) % n if gap else rng.choice([k for k in range(n) if k != i])
    bad = {hs[i], hs[j]}
    done, _, b = run_rounds(hs, simulate(bad))
    assert set(b.blamed) == bad, (n, sorted(bad), b.inconclusive)
    assert len(done) <= 3


@pytest.mark.parametrize("n", [n for n in SIZES if n >= 3])
def test_a_bad_link_between_good_hosts_is_a_link_not_a_host(n: int) -> None:
    hs = hosts(n)
    rounds = R.ring_rounds(hs)
    link = rounds[0][0][0]
    done, _, b = run_rounds(hs, simulate(set(), {link}))
    assert b.blamed == {} and b.bad_links == [tuple(sorted(link))]
    assert len(done) == 2


def test_two_hosts_cannot_be_told_apart() -> None:
    done, _, b = run_rounds(["a", "b"], simulate({"b"}))
    assert b.blamed == {} and set(b.inconclusive) == {"a", "b"} and len(done) == 1


@settings(max_examples=300, deadline=None)
@given(n=st.integers(min_value=2, max_value=1024), data=st.data())
def test_no_healthy_host_is_ever_blamed(n: int, data: st.DataObject) -> None:
    hs = hosts(n)
    nbad = data.draw(st.integers(min_value=0, max_value=min(3, n)))
    bad = set(data.draw(st.permutations(hs))[:nbad]) if nbad else set()
    nlinks = data.draw(st.integers(min_value=0, max_value=2))
    # Bad links share no host: a host whose every link is slow is, to any measurement, a bad
    # host (its port, cable or NIC), and blaming it is right.
    links: set[tuple[str, str]] = set()
    for _ in range(nlinks):
        i = data.draw(st.integers(min_value=0, max_value=n - 1))
        link = (hs[i], hs[(i + 1) % n])
        if n >= 3 and not any(set(link) & set(other) for other in links):
            links.add(link)
    _, _, b = run_rounds(hs, simulate(bad, links))
    assert set(b.blamed) <= bad
    assert all(set(p) & set(hs) for p in b.bad_links)


def test_plan_describes_a_maintenance_window() -> None:
    text = R.plan(1000).describe()
    assert text.splitlines()[0].startswith("1000 hosts: 2 rounds")
    assert "round 1: 500 pairs" in text and "round 2: 500 pairs" in text
    odd = R.plan(7).describe()
    assert "round 1: 4 pairs in 2 steps" in odd and "round 2: 3 pairs" in odd


def test_plan_flag_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from rdmaprov.cli import main

    assert main(["validate", "--plan", "64"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("64 hosts: 2 rounds") and "round 2: 32 pairs" in out
    assert main(["validate", "--plan", "0"]) == 1


def _row(size: int, p50: float, p99: float) -> dict:
    return {"bytes": size, "iter_us": {"n": 20, "p50_us": p50, "p99_us": p99, "max_us": p99}}


def test_jitter_is_judged_at_the_large_sizes_only() -> None:
    """A 4x spread at 1 MiB (launch latency) is not the fabric's; 2.5x at 512 MiB is."""
    rows = [_row(1 << 20, 10.0, 40.0), _row(256 << 20, 100.0, 120.0),
            _row(512 << 20, 200.0, 500.0), _row(1 << 30, 400.0, 440.0)]
    j = R.jitter(rows)
    assert j is not None and j.bytes == 512 << 20 and j.ratio == 2.5
    assert R.unstable(rows) and not R.unstable(rows, limit=3.0)
    assert R.jitter(rows[:1] + rows[3:]).ratio == pytest.approx(1.1)
    assert R.jitter([{"bytes": 1 << 30, "busbw_GBps": 1.0}]) is None  # an older worker
    assert not R.unstable(None)
    few = [{"bytes": 1 << 30, "iter_us": {"n": 5, "p50_us": 1.0, "p99_us": 9.0}}]
    assert R.jitter(few) is None  # p99 of 5 is the single slowest: not judged


def test_an_unstable_fabric_gets_pair_rounds() -> None:
    from rdmaprov.validate import worker

    assert worker.want_pairs("auto", 4, 23.0, 20.0, unstable=True)[0]
    assert worker.want_pairs("slow", 4, 23.0, 20.0, unstable=True)[0]
    assert not worker.want_pairs("slow", 4, 23.0, 20.0)[0]
    assert not worker.want_pairs("never", 4, 23.0, 20.0, unstable=True)[0]


FLEET = hosts(10_000)


@pytest.mark.parametrize("bad", [
    {FLEET[0]}, {FLEET[4_999]}, {FLEET[-1]},                        # one slow host: 2 rounds
    {FLEET[10], FLEET[11]}, {FLEET[-1], FLEET[0]}, {FLEET[20], FLEET[22]},  # side by side, apart
    set(FLEET[3_000:3_040]),                                         # a rack of 40 side by side
    set(random.Random(29).sample(FLEET, 25)),                        # 25 anywhere
    set(FLEET[100:110]) | set(FLEET[7_000:7_200:2]),                 # a rack, and every other host
], ids=["first", "middle", "last", "pair", "pair-wraps", "one-apart", "rack-40", "random-25",
        "rack-and-alternate"])
def test_slow_hosts_are_named_in_at_most_three_rounds_at_10000_hosts(bad: set[str]) -> None:
    done, _, b = run_rounds(FLEET, simulate(bad))
    assert set(b.blamed) == bad and b.settled and not b.bad_links
    # A bad host with no other within two places on the ring is named in rounds 1-2.
    where = {h: i for i, h in enumerate(FLEET)}
    alone = not any(FLEET[(where[h] + d) % len(FLEET)] in bad for h in bad for d in (1, 2))
    assert len(done) == (2 if alone else 3)
    for rnd in done:
        assert len(rnd) <= 2, "a round of more than two steps"
        for step in rnd:
            busy = [h for p in step for h in p]
            assert len(busy) == len(set(busy)), "a host twice in one step"


def test_the_confirm_round_gives_each_doubtful_host_the_good_partners_it_lacks() -> None:
    hs = hosts(12)
    bad = set(hs[3:7])  # hosts 4 and 5 meet only bad hosts in rounds 1-2; 3 and 6 one good one
    figures: dict = {}
    for number, rnd in enumerate(R.ring_rounds(hs), 1):
        for step_no, step in enumerate(rnd, 1):
            figures.update(simulate(bad)(number, step_no, step))
    slow = classify(figures)
    state = R.blame(hs, slow)
    assert set(state.inconclusive) == bad
    rnd = R.confirm_round(hs, slow)
    met = {h: [g for step in rnd for g, d in step if d == h] for h in bad}
    assert {h: len(g) for h, g in met.items()} == {hs[3]: 1, hs[4]: 2, hs[5]: 2, hs[6]: 1}
    assert all(g in state.good and R._key(g, h) not in slow for h in bad for g in met[h])
    assert len(rnd) == 2
    assert R.confirm_round(hs, {p: False for p in slow}) == []


def test_plan_10000_hosts() -> None:
    text = R.plan(10_000).describe()
    assert text.splitlines()[0] == "10000 hosts: 2 rounds of pairs, every pair of a step at once"
    assert "round 1: 5000 pairs\n" in text and "round 2: 5000 pairs\n" in text
    assert "in at most 2 steps" in text


def _ports(*names: str, state: str = "4: ACTIVE") -> list[dict]:
    return [{"device": n, "port": 1, "state": state, "rate_gbps": 400} for n in names]


def test_rail_plan_rail_aligned_in_two_rounds_and_skips_with_a_reason():
    eight = [f"mlx5_{i}" for i in range(8)]
    hosts = ["n1", "n2", "n3", "n4", "n5", "lab", "single"]
    ports = {h: _ports(*eight) for h in hosts[:5]}
    ports["lab"] = []
    ports["single"] = _ports("mlx5_0")
    plan = R.rail_plan(hosts, ports)
    assert plan.skipped == {
        "lab": "not applicable: no RDMA device",
        "single": "not applicable: one HCA port (mlx5_0 port 1), which the fabric run measures"}
    assert len(plan.rounds) <= 2
    assert [[(p.client, p.server) for p in r] for r in plan.rounds] == [
        [("n1", "n2"), ("n3", "n4")], [("n2", "n3"), ("n4", "n5")]]
    clients = {p.client for r in plan.rounds for p in r}
    servers = {p.server for r in plan.rounds for p in r}
    assert clients | servers == {"n1", "n2", "n3", "n4", "n5"}  # every host's rails measured
    for r in plan.rounds:  # a host is in one pair per round: its rails run once at a time
        ends = [h for p in r for h in (p.client, p.server)]
        assert len(ends) == len(set(ends))
    pair = plan.rounds[0][0]
    assert pair.rails[3] == (("mlx5_3", 1), ("mlx5_3", 1))  # rail k meets rail k
    # An even ring closes: the last host meets the first in round 2.
    even = R.rail_plan(["a", "b", "c", "d"], {h: _ports("mlx5_0", "mlx5_1") for h in "abcd"})
    assert [(p.client, p.server) for p in even.rounds[1]] == [("b", "c"), ("d", "a")]
    # A DOWN port is not a rail; one host with several ports has nobody to pair with.
    lone = R.rail_plan(["a", "b"], {"a": _ports("mlx5_0", "mlx5_1"),
                                    "b": _ports("mlx5_0", "mlx5_1", state="1: DOWN")})
    assert lone.rounds == [] and set(lone.skipped) == {"a", "b"}


def test_rail_argv_client_and_server():
    server = R.rail_argv("mlx5_3", 1, 3)
    assert server[:7] == ["ib_write_bw", "-d", "mlx5_3", "-i", "1", "-p", str(18515 + 3)]
    assert "--report_gbits" in server and "-F" in server and server[-1] == "--report_gbits"
    client = R.rail_argv("mlx5_3", 1, 3, "10.0.0.2", cuda_device=3, gid_index=3)
    assert client[-4:] == ["--use_cuda=3", "-x", "3", "10.0.0.2"]
    assert R.rail_file("mlx5_3", 1) == "mlx5_3.port1.log"
    from rdmaprov.validate import judge as J

    assert J._RAIL_FILE.match(R.rail_file("mlx5_3", 1))  # the judge reads what is written
    # One file per rail and round (both ends keep every figure); the layout before still read.
    assert R.rail_file("mlx5_3", 1, 2) == "mlx5_3.port1.round2.log"
    m = J._RAIL_FILE.match(R.rail_file("mlx5_3", 1, 2))
    assert m and (m["hca"], m["port"], m["round"]) == ("mlx5_3", "1", "2")
    assert J._RAIL_FILE.match(R.rail_file("mlx5_3", 1))["round"] is None
    assert not J._RAIL_FILE.match("mlx5_3.port1.round2.server")  # the server's own output


def test_rounds_are_numbered_and_slowness_is_judged_over_every_figure_so_far() -> None:
    """The worker's progress lines and entries carry (round, step); the relative rule moves with
    the best pair, so a pair fast in round 1 may be slow once a faster pair is seen."""
    hs = hosts(5)
    calls: list[tuple[int, int]] = []
    seen: list[int] = []

    def measure(number, step_no, step):
        calls.append((number, step_no))
        return {p: FAST for p in step}

    def classify_all(figures):
        seen.append(len(figures))
        return R.slow_pairs(figures, None, 0.4)[0]

    done, slow, b = R.run_rounds(hs, measure, classify_all)
    assert calls == [(r, s) for r, rnd in enumerate(done, 1) for s in range(1, len(rnd) + 1)]
    assert calls[:3] == [(1, 1), (1, 2), (2, 1)]  # 5 on a ring: round 1 has one extra step
    assert seen == [5] and not any(slow.values()) and b.settled  # every edge of the ring


def test_a_pair_fast_alone_is_slow_once_the_best_pair_is_seen() -> None:
    hs = hosts(4)
    speed = {h: 10.0 for h in hs} | {hs[0]: 1.0}  # hs[0]'s pairs run at a tenth

    def measure(number, step_no, step):
        return {p: min(speed[p[0]], speed[p[1]]) for p in step}

    _, slow, b = R.run_rounds(hs, measure, lambda f: R.slow_pairs(f, None, 0.4)[0])
    assert list(b.blamed) == [hs[0]] and sum(slow.values()) == 2


def test_the_line_rate_bar_is_the_slowest_hosts_and_none_when_one_is_unknown() -> None:
    """One rule for the worker's plan and the judge's bar (verdict.fabric_bar)."""
    from rdmaprov.validate import verdict as V

    rates = {"b": 50.0, "a": 25.0, "c": 25.0}  # GB/s; a tie goes to the first name
    assert R.line_rate_bar(rates, 0.8) == ("a", 20.0)
    assert V.fabric_bar(V.Policy(bw_fraction=0.8), rates, on_tcp=False).GBps == 20.0
    for unknown in ({"a": 25.0, "b": None}, {"a": 25.0, "b": 0.0}, {}):
        assert R.line_rate_bar(unknown, 0.8) is None
        assert V.fabric_bar(V.Policy(), unknown, on_tcp=False).GBps is None
