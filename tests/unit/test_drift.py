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


def test_parse_set_reads_values_by_their_declared_type() -> None:
    assert drift.parse_set(["net_mtu_default=9000", "roce_qos_ecn=false",
                            "roce_qos_interfaces=[eth1, eth2]"]) == {
        "net_mtu_default": 9000, "roce_qos_ecn": False, "roce_qos_interfaces": ["eth1", "eth2"]}
    with pytest.raises(UserError, match="expected key=value"):
        drift.parse_set(["net_mtu_default"])


@pytest.mark.parametrize(("given", "read"), [
    # Several pairs in one value, split where the next word starts name=.
    ("net_mtu_default=4000 roce_qos_ecn=no", {"net_mtu_default": 4000, "roce_qos_ecn": False}),
    # A space inside brackets or quotes is the value's.
    ("net_mtu_interfaces=[{name: eth1, mtu: 4000}]",
     {"net_mtu_interfaces": [{"name": "eth1", "mtu": 4000}]}),
    ("nccl_env_extra={NCCL_DEBUG: WARN, NCCL_X: a=b}",
     {"nccl_env_extra": {"NCCL_DEBUG": "WARN", "NCCL_X": "a=b"}}),
    ("nccl_env_socket_ifname='eth 1' net_mtu_default=9000",
     {"nccl_env_socket_ifname": "eth 1", "net_mtu_default": 9000}),
    # A list also as a,b (the argument spec's own reading); a string stays as written.
    ("roce_qos_interfaces=eth1,eth2", {"roce_qos_interfaces": ["eth1", "eth2"]}),
    ("nccl_env_use_pyverbs=yes", {"nccl_env_use_pyverbs": "yes"}),
    # An int as the argument spec converts text (no YAML octal).
    ("roce_qos_dscp=010", {"roce_qos_dscp": 10}),
    # A value its type cannot take stays text, for the variable check to name.
    ("net_mtu_default=lots", {"net_mtu_default": "lots"}),
    # A name no role declares keeps its text, as ansible-playbook's key=value does.
    ("marker=010 other=[1]", {"marker": "010", "other": "[1]"}),
    ("net_mtu_default={{ mtu }}", {"net_mtu_default": "{{ mtu }}"}),
    ('{"net_mtu_default": 4000}', {"net_mtu_default": 4000}),
])
def test_e_and_set_read_the_same_forms(given: str, read: dict) -> None:
    from rdmaprov import extravars

    assert extravars.parse([given], "-e") == [("-e", read)]
    assert drift.parse_set([given]) == read


def test_e_and_set_read_a_file(tmp_path: Path) -> None:
    from rdmaprov import extravars

    f = tmp_path / "vars.yml"
    f.write_text("net_mtu_default: 4000\n")
    assert extravars.parse([f"@{f}"], "--set") == [(f"{f} (--set @)", {"net_mtu_default": 4000})]
    assert drift.parse_set([f"@{f}", "net_mtu_default=1500"]) == {"net_mtu_default": 1500}
    f.write_text("- 1\n")
    with pytest.raises(UserError, match="--set values must be a mapping, not list"):
        drift.parse_set([f"@{f}"])
    with pytest.raises(UserError, match="-e '=2': expected key=value"):
        extravars.parse(["=2 a=1"], "-e")


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
