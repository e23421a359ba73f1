"""The firewall_apply action (plugins/action/firewall_apply.py): which builtin modules it runs for
a plan, in which order, under check mode or not, and what it reports. The modules are stubbed;
the lab runs them for real (tests/integration/test_firewall_lab.py)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from unittest import mock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from rdmaprov.collection import netcfg_firewall as fw

ROOT = Path(__file__).resolve().parents[2]
PROBE = json.loads((ROOT / "tests/fixtures/firewall/probe-bookworm-listeners.json").read_text())
SETTINGS = {"backend": "auto", "policy": "scoped", "cluster_subnets": ["10.198.246.8/29"],
            "allow_control_host": True, "ssh_sources": [], "ssh_port": 22,
            "rendezvous_ports": [29500], "nccl_port_range": "auto", "roce_udp_port": 4791,
            "slurm": "auto", "allow": [], "waive": [], "host": "node1", "connection": "ssh",
            "nft_extra_rules": [], "nft_dir": "/etc/rdmaprov",
            "nft_unit_name": "rdmaprov-firewall.service", "nft_table": "rdmaprov",
            "firewalld_policy": "rdmaprov", "rollback_seconds": 45}


class Host:
    """The stubbed host: what each module and copy answers, and what ran (with check mode)."""

    def __init__(self, answers=None):
        self.answers = answers or {}
        self.ran = []

    def module(self, action, module_name, module_args, task_vars):
        check = action._task.check_mode
        key = " ".join(module_args["argv"]) if "argv" in module_args else module_name
        self.ran.append((module_name.rsplit(".", 1)[-1], key, check))
        return dict(self.answers.get(key, {"changed": False, "rc": 0, "stdout": ""}))

    def copy(self, args, check):
        key = args["dest"]
        self.ran.append(("copy", key, check))
        return dict(self.answers.get(key, {"changed": False}))


def run(monkeypatch, plan, step, check=False, host=None, task_vars=None):
    from ansible.plugins.action import ActionBase

    mod = importlib.import_module("ansible_collections.rdmaprov.cluster.plugins.action."
                                  "firewall_apply")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    host = host or Host()
    task = mock.MagicMock()
    task.args = {"plan": plan, "step": step}
    task.check_mode = check
    task.copy.side_effect = lambda: mock.MagicMock(check_mode=task.check_mode, args={})
    action = mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), DataLoader(),
                              Templar(loader=DataLoader(), variables={}), mock.MagicMock())
    monkeypatch.setattr(action, "_remove_tmp_path", lambda path: None)
    monkeypatch.setattr(action, "_execute_module",
                        lambda module_name, module_args, task_vars: host.module(
                            action, module_name, module_args, task_vars))
    action._shared_loader_obj = mock.MagicMock()
    loader = action._shared_loader_obj.action_loader

    def copy_action(name, task, **kwargs):
        assert name == "ansible.legacy.copy"
        return mock.MagicMock(run=lambda task_vars: host.copy(task.args, task.check_mode))
    loader.get.side_effect = copy_action
    return action.run(task_vars=task_vars or {"inventory_hostname": "node1"}), host.ran


def _ufw_plan(check=False):
    return fw.plan({**PROBE, "ufw_present": True}, {**SETTINGS, "backend": "ufw",
                                                    "check_mode": check})


def test_ufw_rules_run_and_changed_is_what_ufw_says(monkeypatch):
    plan = _ufw_plan()
    first, second = (" ".join(c) for c in plan["commands"][:2])
    host = Host({first: {"rc": 0, "stdout": "Skipping adding existing rule\n"},
                 second: {"rc": 0, "stdout": "Rule added\n"}})
    res, ran = run(monkeypatch, plan, "configure", host=host)
    assert [r[1] for r in ran] == [" ".join(c) for c in plan["commands"]]
    assert res["changed"] is True and not res.get("failed")
    assert [r["changed"] for r in res["steps"][:2]] == [False, True]
    # Nothing added: not changed.
    host = Host({" ".join(c): {"rc": 0, "stdout": "Skipping adding existing rule\n"}
                 for c in plan["commands"]})
    assert run(monkeypatch, plan, "configure", host=host)[0]["changed"] is False


def test_a_failing_command_stops_and_names_itself(monkeypatch):
    plan = _ufw_plan()
    first = " ".join(plan["commands"][0])
    host = Host({first: {"rc": 1, "failed": True, "msg": "non-zero return code",
                         "stderr": "ERROR: Bad port"}})
    res, ran = run(monkeypatch, plan, "configure", host=host)
    assert len(ran) == 1 and res["failed"] is True
    assert res["msg"] == f"{first}: non-zero return code"


def test_under_check_the_plans_dry_runs_run_and_the_rest_is_reported(monkeypatch):
    plan = fw.plan({**PROBE, "ufw_present": True},
                   {**SETTINGS, "backend": "ufw", "check_mode": True, "policy": "deny",
                    "waive": ["68/udp", "5353/udp", "9100/tcp"]})
    res, ran = run(monkeypatch, plan, "configure", check=True)
    # `ufw --dry-run` runs for real (check mode off for it): ufw answers what it would do.
    assert ran and all(r[1].startswith("ufw --dry-run allow") and r[2] is False for r in ran)
    assert res["changed"] is True and res["_ansible_verbose_always"] is True
    assert res["msg"] == res["rdmaprov_report"] == [
        "node1: drift: ufw is inactive; firewall_policy=deny switches it on"]
    # A plan made for a real run, in a task that runs in check mode, runs nothing for real.
    res, ran = run(monkeypatch, _ufw_plan(), "configure", check=True)
    assert ran and all(r[2] is True for r in ran)
    # firewalld under --check: the planned calls are reported, none runs.
    fwd = fw.plan({**PROBE, "firewalld_active": True, "firewalld_policy": {
        "permanent": {"rc": 1, "stdout": "", "stderr": ""},
        "runtime": {"rc": 1, "stdout": "", "stderr": ""}}}, {**SETTINGS, "check_mode": True})
    res, ran = run(monkeypatch, fwd, "configure", check=True)
    assert ran == [] and res["changed"] is True and res["msg"][0].startswith("node1: drift: ")


def test_nftables_configure_writes_the_candidate_and_clears_an_old_timer(monkeypatch):
    plan = fw.plan(PROBE, SETTINGS)
    res, ran = run(monkeypatch, plan, "configure",
                   host=Host({"/etc/rdmaprov/firewall.nft.new": {
                       "changed": True, "diff": {"before": "", "after": "x"}}}))
    assert ran == [("file", "ansible.legacy.file", False),
                   ("copy", "/etc/rdmaprov/firewall.nft.new", False),
                   ("copy", "/etc/rdmaprov/firewall.rollback.nft", False),
                   ("command", " ".join(plan["nft_clear_timer"]), False)]
    assert res["changed"] is True and res["diff"] == [{"before": "", "after": "x"}]
    # No old timer (systemctl: 5, no such unit) is fine; another error is not.
    clear = " ".join(plan["nft_clear_timer"])
    assert not run(monkeypatch, plan, "configure",
                   host=Host({clear: {"rc": 5, "failed": True}}))[0].get("failed")
    res = run(monkeypatch, plan, "configure", host=Host({clear: {"rc": 1, "failed": True,
                                                              "msg": "boom"}}))[0]
    assert res["failed"] is True and res["msg"] == (
        "Clear a rollback timer left from an earlier run: boom")
    # Under --check nothing is stopped; the files say what they would change.
    ran = run(monkeypatch, plan, "configure", check=True)[1]
    assert [r[0] for r in ran] == ["file", "copy", "copy"] and all(r[2] for r in ran)
    # The live table is the wanted one: only the directory and the candidate.
    live = fw.plan({**PROBE, "nft_table": {"rc": 0, "stdout": plan["nft_rules"], "stderr": ""}},
                   SETTINGS)
    assert [r[1] for r in run(monkeypatch, live, "configure")[1]] == [
        "ansible.legacy.file", "/etc/rdmaprov/firewall.nft.new"]
    # A candidate nft -c refuses: failed, and nothing after it.
    res, ran = run(monkeypatch, plan, "configure", host=Host({
        "/etc/rdmaprov/firewall.nft.new": {"failed": True, "msg": "failed to validate"}}))
    assert res["msg"] == "Write and check the candidate ruleset: failed to validate"
    assert len(ran) == 2


def test_nftables_persist_installs_and_enables_the_unit(monkeypatch):
    plan = fw.plan(PROBE, SETTINGS)
    unit = "/etc/systemd/system/rdmaprov-firewall.service"
    res, ran = run(monkeypatch, plan, "persist", host=Host({unit: {"changed": True}}))
    assert [r[1] for r in ran] == ["/etc/rdmaprov/firewall.nft", unit,
                                   "ansible.legacy.systemd_service"]
    assert res["changed"] is True
    # Under --check with the ruleset still to load, nothing is persisted; a unit still to write
    # is not enabled (it does not exist yet).
    check = fw.plan(PROBE, {**SETTINGS, "check_mode": True})
    res, ran = run(monkeypatch, check, "persist", check=True, host=Host({unit: {"changed": True}}))
    assert [r[1] for r in ran] == [unit] and res["changed"] is True
    # Other backends persist nothing here.
    res, ran = run(monkeypatch, _ufw_plan(), "persist")
    assert ran == [] and res["skipped"] is True and res["changed"] is False


def test_the_rollback_report_names_the_failed_task_and_what_is_back(monkeypatch):
    plan = fw.plan(PROBE, SETTINGS)
    read = "nft list table inet rdmaprov"
    task_vars = {"inventory_hostname": "node2",
                 "ansible_failed_task": {"name": "Reconnect through the new ruleset"},
                 "ansible_failed_result": {"msg": "timed out"}}
    res, ran = run(monkeypatch, plan, "rolled_back", check=False,
                   host=Host({read: {"rc": 1, "failed": True}}), task_vars=task_vars)
    assert ran == [("command", read, False)]
    assert res["failed"] is True and res["msg"] == fw.rollback_report(
        plan, "node2", "Reconnect through the new ruleset", "timed out", 1)
    assert "(absent, as before)" in res["msg"]
    res = run(monkeypatch, plan, "rolled_back", host=Host({read: {"rc": 0}}),
              task_vars={"inventory_hostname": "node2", "ansible_failed_task": {"name": "x"},
                         "ansible_failed_result": {}})[0]
    assert "(x: connection lost)" in res["msg"] and "(restored)" in res["msg"]


def test_an_unknown_step_is_refused(monkeypatch):
    from ansible.errors import AnsibleActionFail

    with pytest.raises(AnsibleActionFail, match="value of step must be one of"):
        run(monkeypatch, _ufw_plan(), "bogus")


def test_the_probes_action_takes_the_table_and_policy_from_the_roles_variables(monkeypatch):
    from ansible.plugins.action import ActionBase

    mod = importlib.import_module("ansible_collections.rdmaprov.cluster.plugins.action."
                                  "firewall_probe")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    variables = {"inventory_hostname": "n1", "firewall_nft_table": "own",
                 "firewall_firewalld_policy": "pol", "firewall_rollback_seconds": 30,
                 "ansible_check_mode": True}
    task = mock.MagicMock()
    task.args = {"settings": {}}
    task.resolved_action = "rdmaprov.cluster.firewall_probe"
    action = mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None,
                              Templar(loader=DataLoader(), variables=variables), None)
    calls = []
    monkeypatch.setattr(action, "_execute_module", lambda module_name, module_args, task_vars:
                        calls.append(module_args) or {"changed": False})
    action.run(task_vars=variables)
    (args,) = calls
    assert args["nft_table"] == "own" and args["firewalld_policy"] == "pol"
    assert args["settings"]["rollback_seconds"] == 30 and args["settings"]["check_mode"] is True
    # A task that names them keeps its own.
    task.args = {"settings": {}, "nft_table": "mine"}
    calls.clear()
    action.run(task_vars=variables)
    assert calls[0]["nft_table"] == "mine" and calls[0]["firewalld_policy"] == "pol"


def test_a_disabled_boot_unit_is_a_row_of_the_drift_table(monkeypatch):
    """--check on a node whose table and files are in line but whose boot unit someone disabled:
    the persist step would enable it, and `--check --diff` shows that row (its result has no
    "results" a loop's summary would have, and the enablement as its diff)."""
    from rdmaprov import drift

    plan = fw.plan(PROBE, {**SETTINGS, "check_mode": True})
    plan = {**plan, "persist_nft": True}
    answers = {"ansible.legacy.systemd_service": {
        "changed": True, "status": {"UnitFileState": "disabled"}}}
    res, ran = run(monkeypatch, plan, "persist", check=True, host=Host(answers))
    assert ran[-1] == ("systemd_service", "ansible.legacy.systemd_service", True)
    assert res["changed"] is True and "results" not in res
    rows = drift.DriftCollector()
    rows({"event": "runner_on_ok", "event_data": {
        "host": "node1", "res": res, "task": "Persist the confirmed ruleset",
        "role": "rdmaprov.cluster.firewall"}})
    assert [(r.host, r.current, r.wanted) for r in rows.rows] == [
        ("node1", "enabled=disabled", "enabled=enabled")]
