"""rdmaprov.drift: roles from variable names, batches and the failure budget, and drift rows
from runner events shaped like ansible-runner's (runner_on_ok / runner_item_on_ok)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rdmaprov import drift
from rdmaprov.errors import UserError
from rdmaprov.inventory import load_specs
from rdmaprov.resources import collection_root

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engine"


@pytest.fixture(scope="module")
def specs():
    return load_specs(collection_root())


def test_parse_set_reads_yaml_values() -> None:
    assert drift.parse_set(["net_mtu_default=9000", "roce_qos_ecn=false", "x=[1, 2]"]) == {
        "net_mtu_default": 9000, "roce_qos_ecn": False, "x": [1, 2]}
    with pytest.raises(UserError, match="expected name=value"):
        drift.parse_set(["net_mtu_default"])


def test_roles_from_variable_names(specs) -> None:
    assert drift.roles_for(["roce_qos_pfc_priority", "net_mtu_default", "net_mtu_verify"],
                           specs) == ["net_mtu", "roce_qos"]
    # rdma_ofed_ and rdma_modules_ share 'rdma_': the longest prefix decides.
    assert drift.roles_for(["rdma_modules_ipoib"], specs) == ["rdma_modules"]


def test_a_play_setting_is_not_a_role_setting(specs) -> None:
    with pytest.raises(UserError, match="--set rdmaprov_serial: not a role setting"):
        drift.roles_for(["rdmaprov_serial"], specs)


@pytest.mark.parametrize(("name", "message"), [
    ("mtu", "--set: unknown variable mtu; no rdmaprov role declares it"),
    ("net_mtu_defualt", "--set: unknown variable net_mtu_defualt (did you mean net_mtu_default?)"),
    # Another role's variable with our role's name as prefix is not ours either.
    ("firewall_state", "--set: unknown variable firewall_state; no rdmaprov role declares it"),
])
def test_a_name_no_role_declares_is_an_error(specs, name: str, message: str) -> None:
    with pytest.raises(UserError) as exc:
        drift.roles_for([name], specs)
    assert str(exc.value).startswith(message)


@pytest.mark.parametrize("text, total, size", [
    (None, 7, 7), ("2", 7, 2), ("25%", 8, 2), ("10%", 4, 1), ("100%", 5, 5), ("50", 3, 3)])
def test_batch_size(text: str | None, total: int, size: int) -> None:
    assert drift.batch_size(text, total) == size


@pytest.mark.parametrize("text", ["x", "-1", "150%", "2.5"])
def test_bad_batch(text: str) -> None:
    with pytest.raises(UserError, match="--batch"):
        drift.batch_size(text, 10)


def test_max_fail_and_batches() -> None:
    assert drift.max_failures(None, 10) == 0
    assert drift.max_failures("20%", 10) == 2
    assert drift.max_failures("3", 10) == 3
    assert drift.batches(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]


def ev(kind: str, host: str, res: dict, task: str = "Set the runtime MTU",
       role: str = "net_mtu") -> dict:
    return {"event": kind, "event_data": {"host": host, "task": task, "role": role, "res": res}}


def test_drift_rows_from_loop_labels_and_diffs() -> None:
    c = drift.DriftCollector()
    c(ev("runner_item_on_ok", "node1", {"changed": True,
                                        "_ansible_item_label": "eth1: 1500 -> 9000"}))
    c(ev("runner_item_on_ok", "node1", {"changed": False,
                                        "_ansible_item_label": "eth2: 9000 -> 9000"}))
    # The loop's own summary event repeats the items: not a second row.
    c(ev("runner_on_ok", "node1", {"changed": True, "results": [{}]}))
    c(ev("runner_on_ok", "node2", {"changed": True, "diff": [{
        "before": "", "after": "ib_uverbs\nrdma_ucm\n", "before_header": "/etc/m.conf",
        "after_header": "/tmp/x/template"}]},
        task="Persist the modules", role="rdmaprov.cluster.rdma_modules"))
    c(ev("runner_on_ok", "node3", {"changed": True, "diff": {
        "before": {"path": "/etc/x", "mode": "0600"}, "after": {"path": "/etc/x", "mode": "0644"}}},
        task="File mode"))
    c(ev("runner_on_ok", "node3", {"changed": True}, task="Restart"))
    assert [(r.host, r.setting, r.current, r.wanted) for r in c.rows] == [
        ("node1", "net_mtu : Set the runtime MTU [eth1]", "1500", "9000"),
        ("node2", "rdma_modules : Persist the modules",
         "/etc/m.conf absent", "+ib_uverbs +rdma_ucm"),
        ("node3", "net_mtu : File mode", "mode=0600", "mode=0644"),
        ("node3", "net_mtu : Restart", "differs", "would change"),
    ]


def test_rows_from_a_real_check_diff_run_on_a_fresh_node() -> None:
    # Recorded from `--check --diff` of rdma_ofed and rdma_modules on a fresh lab node (Debian 12,
    # ansible-core 2.19): apt's prepared text, and templates whose files are absent.
    events = json.loads((FIXTURES / "events-check-diff-fresh-node.json").read_text())
    collector = drift.DriftCollector()
    for ev in events:
        collector(ev)
    rows = {r.setting: r for r in collector.rows}
    apt = rows["rdma_ofed : Install packages"]
    assert apt.current == "apt: not as wanted"
    assert apt.wanted.startswith("install 23: ibverbs-providers ibverbs-utils")
    modules = rows["rdma_modules : Write the modules-load.d file"]
    assert modules.current == "file absent" and modules.wanted == "+10 -0 lines"
    assert not any("/tmp/" in r.current for r in collector.rows)
