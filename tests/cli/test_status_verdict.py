"""status's verdict: every value that differs from what the roles want is marked, and the exit
code says whether anything drifts (0 in line, 2 drift or a host that did not answer, 1 bad input).

The results are those the status playbook's two tasks gave on a 3-node lab
(tests/fixtures/status/lab-drift.json: node1's eth1 set back to 1500, node2's /etc/nccl.conf
deleted), fed through the real CLI as the runner's events; the verdict is the roles' own (the
site plan's, every role read), which status only places in its columns."""
from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path
from typing import Any

import fake_session  # beside this file (rootdir import)
import pytest
import yaml
from rich.console import Console

from rdmaprov.cli import main
from rdmaprov.cli import status as st
from rdmaprov.engine import Failure, HostResult, RunResult

ROOT = Path(__file__).resolve().parents[2]
RECORD = json.loads((ROOT / "tests/fixtures/status/lab-drift.json").read_text())["hosts"]
HOSTS = ("node1", "node2", "node3")


class FakeSession(fake_session.FakeSession):
    result = RunResult(rc=0, status="successful", artifacts_dir=None,
                       hosts={h: HostResult(h, ok=3) for h in HOSTS})


@pytest.fixture(autouse=True)
def state_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.fixture
def inventory(tmp_path) -> Path:
    inv = tmp_path / "hosts.ini"
    inv.write_text("".join(f"{h} ansible_connection=local\n" for h in HOSTS)
                   + "\n[all:vars]\nansible_python_interpreter={{ ansible_playbook_python }}\n")
    return inv


def events(record: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for host, rec in record.items():
        out.append({"event": "runner_on_ok", "event_data": {
            "host": host, "task": st.PROBE_TASK, "res": rec["node_state"]}})
        if rec.get("site_plan") is not None:
            out.append({"event": "runner_on_ok", "event_data": {
                "host": host, "task": st.ROLES_TASK, "res": rec["site_plan"]}})
    return out


def in_line() -> dict[str, dict[str, Any]]:
    """The record with node1 and node2 repaired: node3's answers, which were in line."""
    rec = copy.deepcopy(RECORD)
    for host in ("node1", "node2"):
        rec[host] = copy.deepcopy(RECORD["node3"])
    return rec


def status(monkeypatch, capsys, inventory: Path, record, *args: str,
           result: RunResult | None = None) -> tuple[int, str]:
    monkeypatch.setattr(FakeSession, "events", events(record))
    if result is not None:
        monkeypatch.setattr(FakeSession, "result", result)
    monkeypatch.setattr("rdmaprov.cli.status.RunnerSession", FakeSession)
    code = main(["status", str(inventory), *args])
    return code, capsys.readouterr().out


def rows(out: str) -> dict[str, str]:
    return {line.split()[0]: line for line in out.splitlines()
            if line.split() and line.split()[0] in HOSTS}


def test_the_mtu_and_the_deleted_nccl_conf_are_marked_and_status_exits_2(
        monkeypatch, capsys, inventory) -> None:
    code, out = status(monkeypatch, capsys, inventory, RECORD)
    assert code == 2
    row = rows(out)
    assert "eth0 1500, !eth1 1500 " in row["node1"] and "!" not in row["node1"].replace(
        "!eth1", "")
    assert " !absent " in row["node2"] and row["node2"].count("!") == 1
    assert "!" not in row["node3"]
    marks = [line for line in out.splitlines() if line.startswith(st.MARK + " ")]
    assert marks == ["! node1 mtu: eth1 1500, the roles want 9000",
                     "! node2 nccl.conf: /etc/nccl.conf absent, nccl_env writes it"]
    assert "drift: 2 of 3 hosts" in out


def test_json_names_the_same_drift_per_host_and_column(monkeypatch, capsys, inventory) -> None:
    code, out = status(monkeypatch, capsys, inventory, RECORD, "--json")
    doc = json.loads(out)
    assert code == 2 and doc["rc"] == 2
    assert doc["drift"] == {"node1": {"mtu": ["eth1 1500, the roles want 9000"]},
                            "node2": {"nccl.conf": ["/etc/nccl.conf absent, nccl_env writes it"]}}
    assert doc["nodes"]["node3"]["drift"] == {}
    assert doc["nodes"]["node2"]["nccl_conf"] == {"path": "/etc/nccl.conf", "exists": False}


def test_all_in_line_exits_0_and_marks_nothing(monkeypatch, capsys, inventory) -> None:
    code, out = status(monkeypatch, capsys, inventory, in_line())
    assert code == 0
    assert "!" not in out
    for row in rows(out).values():
        assert " as written " in row and " all " in row  # nccl.conf as nccl_env writes it; CDI
    assert "in line: 3 of 3 hosts" in out


def test_a_changed_nccl_conf_is_told_from_a_missing_one(monkeypatch, capsys, inventory) -> None:
    rec = in_line()
    rec["node3"]["site_plan"]["differ"] = {"nccl_env": "/etc/nccl.conf would change"}
    rec["node3"]["site_plan"]["nccl_conf"]["differs"] = True
    code, out = status(monkeypatch, capsys, inventory, rec)
    assert code == 2 and " !differs " in rows(out)["node3"]
    assert "! node3 nccl.conf: /etc/nccl.conf: content is not what nccl_env writes" in out


def test_a_value_the_roles_do_not_manage_is_shown_unmarked(monkeypatch, capsys,
                                                           inventory) -> None:
    """No cluster subnets: the firewall role is not managed, not read, and its cell (whatever the
    host has) is never marked; ifb0, which no role sets, neither."""
    rec = in_line()
    for host in HOSTS:
        rec[host]["site_plan"]["roles"]["firewall"] = False
        rec[host]["site_plan"]["shown"].pop("firewall")
        rec[host]["node_state"]["firewall"] = "no rdmaprov table"
        rec[host]["node_state"]["mtu"]["ifb0"] = 1500
    code, out = status(monkeypatch, capsys, inventory, rec)
    assert code == 0 and "!" not in out
    assert "no rdmaprov table" in rows(out)["node1"] and "ifb0 1500" in rows(out)["node1"]


def test_an_unprobed_docker_daemon_json_is_no_drift_a_missing_cdi_spec_is(
        monkeypatch, capsys, inventory) -> None:
    """container_runtime's entry always runs for docker's daemon.json (not probed): status does
    not call that a difference. A deleted RDMA CDI spec it read is one, in the cdi column."""
    rec = in_line()
    shown = rec["node1"]["site_plan"]["shown"]["container_runtime"]
    shown["unprobed"] = ["docker's daemon.json and daemon are not probed"]
    shown["engine"] = "docker"
    rec["node1"]["site_plan"]["differ"] = {}  # seen_drift: only unprobed, so not named
    rec["node2"]["site_plan"]["differ"] = {"container_runtime": "it differs"}
    cdi = rec["node2"]["site_plan"]["shown"]["container_runtime"]
    cdi["differs"] = ["/etc/cdi/rdmaprov-rdma.yaml: absent"]
    cdi["cdi"] = {"present": False, "wanted": True, "devices": ["all"],
                  "drift": ["/etc/cdi/rdmaprov-rdma.yaml: absent"]}
    code, out = status(monkeypatch, capsys, inventory, rec)
    assert code == 2
    assert "!" not in rows(out)["node1"]
    assert " !absent " in rows(out)["node2"] and "podman 4.3.1 " in rows(out)["node2"]
    assert "! node2 cdi: /etc/cdi/rdmaprov-rdma.yaml: absent" in out
    assert "runtime:" not in out


def test_the_site_plan_rule_for_status_leaves_out_what_it_did_not_read() -> None:
    import importlib

    from rdmaprov.collection import input_check  # noqa: F401  (mounts the collection)

    sp = importlib.import_module(
        "ansible_collections.rdmaprov.cluster.plugins.plugin_utils.site_plan")
    unread = {"plan": {"drift": True, "refusal": "", "differs": [],
                       "unprobed": ["docker's daemon.json and daemon are not probed"]}}
    assert sp.judge("container_runtime", unread) == "it differs"  # site.yml runs the role
    assert sp.seen_drift("container_runtime", unread) is None  # status marks nothing
    seen = {"plan": {"drift": True, "refusal": "", "differs": ["image x is missing"]}}
    assert sp.seen_drift("container_runtime", seen) == "it differs"
    assert sp.seen_drift("net_mtu", {"plan": {"host_drift": True}}) == "it differs"
    assert sp.seen_drift("net_mtu", {"failed": True, "msg": "boom"}) == "its probe failed (boom)"


def test_a_host_that_did_not_answer_exits_2_and_says_why(monkeypatch, capsys,
                                                         inventory) -> None:
    rec = {h: r for h, r in in_line().items() if h != "node3"}
    result = RunResult(rc=4, status="failed", artifacts_dir=None, hosts={
        "node1": HostResult("node1", ok=3), "node2": HostResult("node2", ok=3),
        "node3": HostResult("node3", unreachable=True, failure=Failure(
            "Read node state", "ssh: connect to host 10.0.0.3 port 22: Connection refused",
            unreachable=True))})
    code, out = status(monkeypatch, capsys, inventory, rec, result=result)
    assert code == 2
    assert "unreachable" in rows(out)["node3"] and "Connection refused" in rows(out)["node3"]
    assert "!" not in rows(out)["node1"]


def test_a_host_whose_roles_were_not_read_is_not_called_in_line(monkeypatch, capsys,
                                                                inventory) -> None:
    rec = in_line()
    rec["node2"]["site_plan"] = None
    code, out = status(monkeypatch, capsys, inventory, rec)
    assert code == 2 and "! node2 roles: not read: no answer" in out


def test_bad_input_is_exit_1_before_any_host(monkeypatch, capsys, tmp_path) -> None:
    code = main(["status", str(tmp_path / "missing.ini")])
    assert code == 1


def test_status_reads_the_roles_site_yml_runs_with_site_yml_s_conditions() -> None:
    """status.yml's site plan is site.yml's (the same roles and managed conditions), read with
    every: true; the roles are imported there (their defaults) and nothing of them runs."""
    site = yaml.safe_load((ROOT / "playbooks/site.yml").read_text())
    planned = next(t for p in site for t in p.get("tasks", [])
                   if "rdmaprov.cluster.site_plan" in t)["rdmaprov.cluster.site_plan"]
    play = yaml.safe_load((ROOT / "playbooks/status.yml").read_text())[0]
    tasks = {t["name"]: t for t in play["tasks"]}
    ours = tasks[st.ROLES_TASK]["rdmaprov.cluster.site_plan"]
    assert ours["every"] is True and ours["roles"] == planned["roles"]
    assert st.PROBE_TASK in tasks
    block = next(t for t in play["tasks"] if "block" in t)
    assert block["when"] is False
    imported = {t["ansible.builtin.import_role"]["name"].rsplit(".", 1)[-1] for t in block["block"]}
    assert imported == set(planned["roles"])


def lab_rows(record) -> dict[str, dict[str, str]]:
    out = {}
    for host, rec in record.items():
        drift = st.verdict(rec["node_state"], rec["site_plan"])
        out[host] = st.cells(rec["node_state"], None, rec["site_plan"], drift)
    return out


def h100_row() -> dict[str, str]:
    """A real-sized host: OFED, 8 HCAs' netdevs, a validation verdict with its reason."""
    state = copy.deepcopy(RECORD["node3"]["node_state"])
    state.update(drivers="MLNX_OFED_LINUX-24.10-1.1.4.0", gpus=8, runtime="docker 26.1.5",
                 mtu={"eth0": 1500, **{f"ens{n}f0np0": 9000 for n in range(1, 9)}})
    row = st.cells(state, None, RECORD["node3"]["site_plan"], {})
    row["validation"] = "fail (fabric, 2026-12-08 00:10): busbw 3.0 GB/s < 0.8 x 25.0 GB/s"
    return row


@pytest.mark.parametrize("width", [100, 150])
def test_rows_fit_the_terminal_with_every_word_whole(width: int) -> None:
    rows_ = lab_rows(RECORD)
    screen = Console(file=io.StringIO(), width=width, record=True)
    screen.print(st.status_table(rows_))
    lines = screen.export_text().splitlines()
    assert all(len(line.rstrip()) <= width for line in lines)
    starts = [i for i, line in enumerate(lines) if line.split() and line.split()[0] in HOSTS]
    heights = [b - a for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
    # 150 columns: one line a host (it took 9); 100: three at most.
    assert max(heights) <= (1 if width >= 150 else 3), "\n".join(lines)
    words = set(" ".join(lines).split())
    for row in rows_.values():
        for cell in row.values():
            for word in cell.split():
                assert word in words, (word, "\n".join(lines))  # no word folded in two


def test_a_real_sized_host_stacks_its_interfaces_and_keeps_words_whole() -> None:
    screen = Console(file=io.StringIO(), width=100, record=True)
    row = h100_row()
    screen.print(st.status_table({"node1": row}))
    text = screen.export_text()
    assert all(len(line.rstrip()) <= 100 for line in text.splitlines())
    words = set(text.split())
    for cell in row.values():
        assert all(w in words for w in cell.split()), (cell, text)
    assert "OFED 24.10-1.1.4.0" in " ".join(text.split()) or "24.10-1.1.4.0" in words
    # 9 interfaces, two to a line at most: the row is as tall as the MTU cell needs, no more.
    assert len([ln for ln in text.splitlines() if ln.strip()]) - 1 <= 9


def test_a_pipe_gets_one_line_per_host(monkeypatch, capsys, inventory) -> None:
    _code, out = status(monkeypatch, capsys, inventory, RECORD)
    table = out.splitlines()
    assert re.match(r"host\s+drivers\s+modules\s+mtu\s+qos\s+firewall\s+runtime\s+cdi\s+"
                    r"nccl\.conf\s+gpus\s+validation", table[0])
    assert [line.split()[0] for line in table[1:4]] == list(HOSTS)


def test_a_firewall_qos_or_driver_difference_is_named_in_its_column(monkeypatch, capsys,
                                                                   inventory) -> None:
    """What each role's probe read to differ, as the site plan keeps it (Probe.shown), under
    the column of the value: the live table's missing rule, the NIC's PFC, the package."""
    import importlib

    from rdmaprov.collection import input_check  # noqa: F401  (mounts the collection)

    sp = importlib.import_module(
        "ansible_collections.rdmaprov.cluster.plugins.plugin_utils.site_plan")
    rec = in_line()
    fw = {"plan": {"drift": True, "nft_differences": ["lacks: udp dport 4791 accept"],
                   "file_drift": [], "errors": []}}
    qos = {"plan": {"drift": True, "file_drift": ["rdmaprov-roce-qos.service: disabled, wanted "
                                                  "enabled"], "errors": [],
                    "plans": [{"name": "eth1",
                               "drift": ["pfc 0,0,0,0,0,0,0,0 -> 0,0,0,1,0,0,0,0"]}]}}
    ofed = {"drift": True, "differs": True, "setting_errors": [], "mlnx_plan": {},
            "plan": {"missing": ["perftest"], "wrong_version": [], "install": ["perftest"]}}
    rec["node1"]["site_plan"]["differ"] = {"firewall": sp.seen_drift("firewall", fw)}
    rec["node1"]["site_plan"]["shown"]["firewall"] = sp.shown("firewall", fw)
    rec["node2"]["site_plan"]["differ"] = {"roce_qos": sp.seen_drift("roce_qos", qos)}
    rec["node2"]["site_plan"]["shown"]["roce_qos"] = sp.shown("roce_qos", qos)
    rec["node3"]["site_plan"]["differ"] = {"rdma_ofed": sp.seen_drift("rdma_ofed", ofed)}
    rec["node3"]["site_plan"]["shown"]["rdma_ofed"] = sp.shown("rdma_ofed", ofed)
    code, out = status(monkeypatch, capsys, inventory, rec)
    assert code == 2
    assert " !nft 8 rules, accept " in rows(out)["node1"]
    assert " !eth1 not capable " in rows(out)["node2"]
    assert rows(out)["node3"].startswith("node3 !rdma-core 44.0 ")
    assert [line for line in out.splitlines() if line.startswith("! ")] == [
        "! node1 firewall: live table: lacks: udp dport 4791 accept",
        "! node2 qos: eth1: pfc 0,0,0,0,0,0,0,0 -> 0,0,0,1,0,0,0,0",
        "! node2 qos: rdmaprov-roce-qos.service: disabled, wanted enabled",
        "! node3 drivers: not installed: perftest"]
    # A DOCA repository is not probed: the role runs for it, status calls nothing different.
    doca = {"drift": True, "differs": False, "setting_errors": [], "plan": {}, "mlnx_plan": {}}
    assert sp.judge("rdma_ofed", doca) == "it differs" and sp.seen_drift("rdma_ofed", doca) is None
