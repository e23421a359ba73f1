"""Who never joined, and over which path (issue 38): rendezvous.blame on the documents the worker
emits (a real lab run's, tests/fixtures/validate/rendezvous-cut-off.source.md, and the same
records at the store-connect and join phases), the judge's rows and to_drain, and the worker's
join on a real TCPStore."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from rdmaprov.validate import judge as J
from rdmaprov.validate import rendezvous as R
from rdmaprov.validate import slurm as S
from rdmaprov.validate import verdict as V
from rdmaprov.validate import worker_join as WJ

FIX = Path(__file__).resolve().parents[1] / "fixtures/validate/rendezvous-cut-off"
HOSTS = ["node1", "node2", "node3"]


def _docs() -> dict[str, dict]:
    return {h: json.loads((FIX / f"{h}.json").read_text()) for h in HOSTS}


def test_a_node_cut_off_the_fabric_is_named_and_its_peers_only_waited() -> None:
    got = R.blame(HOSTS, _docs())
    assert got["node3"].status == "fail" and got["node3"].drain
    assert got["node3"].line.startswith(
        "cut off the fabric: its connects over eth1 (10.198.248.13) to node1, node2 and theirs "
        "to it timed out, while node1, node2 reach each other"), got["node3"].line
    for h in ("node1", "node2"):
        assert got[h] == R.Verdict("wait", "waiting: node3 cut off the fabric (this host's "
                                           "other paths connected)")


def test_two_hosts_with_no_path_blame_nobody() -> None:
    docs = _docs()
    for d in docs.values():
        rec = d["rendezvous"]
        rec["matrix"] = {"0": {"1": "timed out"}, "1": {"0": "timed out"}}
    got = R.blame(["node1", "node2"], docs)
    assert {v.status for v in got.values()} == {"unclear"}
    assert not any(v.drain for v in got.values())
    assert "either end's path may be the cause" in got["node1"].line


def _store_phase(docs: dict[str, dict], missing: list[int],
                 failed: dict[str, dict[str, int]]) -> dict[str, dict]:
    """The records as the worker leaves them when ranks never reached the store: the joined
    ones in phase 'join' with the missing ranks, the others in 'store connect' with attempts."""
    docs = copy.deepcopy(docs)
    for h, d in docs.items():
        rec = d["rendezvous"]
        for k in ("path", "matrix", "addresses"):
            rec.pop(k, None)
        rec["address"] = "10.198.248.11:29500"
        rec["interface"], rec["source"] = "eth1", f"10.198.248.1{h[-1]}"
        if h in failed:
            rec.update(phase="store connect", attempts=failed[h])
            rec.pop("joined", None)
            rec.pop("connected_s", None)
        else:
            rec.update(phase="join", missing=missing)
            rec["joined"] = {r: e for r, e in rec["joined"].items() if int(r) not in missing}
        d["phase"] = rec["phase"]
    return docs


def test_a_host_that_never_reached_the_store_is_named_with_its_path() -> None:
    docs = _store_phase(_docs(), [2], {"node3": {"timed out": 20}})
    got = R.blame(HOSTS, docs)
    assert got["node3"] == R.Verdict("fail", (
        "never joined the rendezvous at 10.198.248.11:29500 over eth1 (10.198.248.13) (its 20 "
        "connect attempts timed out: the fabric path from node3 to node1 drops)"), drain=True)
    assert got["node1"] == got["node2"] == R.Verdict(
        "wait", "waiting: node3 did not join the rendezvous")


def test_the_rendezvous_host_cut_off_is_named_by_all_the_others() -> None:
    docs = _store_phase(_docs(), [1, 2], {"node2": {"timed out": 20}, "node3": {"timed out": 19}})
    got = R.blame(HOSTS, docs)
    assert got["node1"].status == "fail" and got["node1"].drain
    assert got["node1"].line.startswith("no other host reached the rendezvous at "
                                        "10.198.248.11:29500 that this host holds")
    assert got["node2"].status == got["node3"].status == "wait"
    assert "could not reach the rendezvous host node1" in got["node3"].line


def test_a_missing_host_without_a_record_is_named_not_drained() -> None:
    docs = _store_phase(_docs(), [2], {})
    del docs["node3"]
    steps = {"node3": "1.0 launch start\n2.0 rank2 start\n3.0 rank2 import torch\n"}
    got = R.blame(HOSTS, docs, steps=steps)
    assert got["node3"] == R.Verdict("fail", (
        "never joined the rendezvous at 10.198.248.11:29500: its worker's last step was "
        "'import torch'"), drain=False)


def test_judge_and_to_drain(tmp_path: Path) -> None:
    run = tmp_path / "fabric"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"hosts": HOSTS, "master": "node1",
                                              "backend": "gloo", "label": "fabric"}))
    for h, d in _docs().items():
        (run / h).mkdir()
        (run / h / "result.json").write_text(json.dumps(d))
        (run / h / "rc").write_text("1\n")
        (run / h / "worker.log").write_text(json.dumps(d) + "\n")
    report = J.judge(tmp_path, V.Policy())
    rows = {h.host: h for h in report.hosts}
    assert not rows["node3"].passed and not rows["node3"].error and not rows["node3"].waiting
    assert rows["node3"].reasons[0].startswith("cut off the fabric")
    for h in ("node1", "node2"):
        assert rows[h].waiting and rows[h].error
        assert rows[h].reasons == ["waiting: node3 cut off the fabric (this host's other paths "
                                   "connected)"]
    assert list(S.to_drain(report)) == ["node3"]
    assert report.error.startswith("the rendezvous did not complete: node3: cut off the fabric")


torch = pytest.importorskip("torch")


def test_the_worker_names_the_ranks_that_never_joined() -> None:
    # Rank 0 of 2 on a real TCPStore; rank 1 never comes: the join ends at its limit (1 s here)
    # with the missing rank in the record the document carries.
    record: dict = {"rank": 0, "node": 0}
    t0 = time.monotonic()
    store = WJ.connect_store(torch, record, 0, 2, "127.0.0.1", 0, 1.0, False, lambda s: None)
    with pytest.raises(WJ.RendezvousFailed) as exc:
        WJ.join(store, record, 0, 2, 0, "me", 1.0, lambda s: None)
    assert time.monotonic() - t0 < 10
    assert exc.value.record["missing"] == [1] and list(exc.value.record["joined"]) == ["0"]
    assert record["attempts"] == {"ok": 1} and record["interface"] == "lo"
