"""site.yml's site plan (plugins/plugin_utils/site_plan.py, the site_plan action): which roles a
host needs, judged from each role's own probe by the condition its own entry acts on, and what
the progress shows for a host whose roles are all in line."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from rdmaprov.collection import input_check  # noqa: F401  (mounts the collection's packages)
from rdmaprov.progress import ProgressState

ROOT = Path(__file__).resolve().parents[2]


def site_plan():
    return importlib.import_module(
        "ansible_collections.rdmaprov.cluster.plugins.plugin_utils.site_plan")


def provision_play():
    plays = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    return next(p for p in plays if p["name"] == "Provision RDMA nodes")


def test_the_site_plan_reads_the_roles_site_yml_runs_in_its_order():
    """One list of roles in two places of site.yml (the site plan's and the imports): held equal
    here, with a probe for each, so that no role is run without having been read."""
    play = provision_play()
    planned = next(t for t in play["tasks"] if "rdmaprov.cluster.site_plan" in t)
    imported = [t["ansible.builtin.import_role"]["name"].rsplit(".", 1)[-1]
                for t in play["tasks"] if "ansible.builtin.import_role" in t]
    assert list(planned["rdmaprov.cluster.site_plan"]["roles"]) == imported
    assert list(site_plan().PROBES) == imported
    assert planned["register"] == site_plan().REGISTER
    end = next(t for t in play["tasks"] if t.get("ansible.builtin.meta") == "end_host")
    assert end["when"] == f"not {site_plan().REGISTER}.drift"


def test_the_nccl_conf_template_is_asked_with_the_role_task_s_own_arguments():
    """The site plan asks nccl_env's template in check mode: same source, destination and
    owner/mode as the role's task, so a file the role would leave alone is in line."""
    src, register, dest_var, more = site_plan().PROBES["nccl_env"].template
    task = yaml.safe_load((ROOT / "roles/nccl_env/tasks/configure.yml").read_text())[0]
    args = task["ansible.builtin.template"]
    assert (ROOT / "roles" / src).is_file() and Path(src).name == args["src"]
    assert args["dest"] == "{{ " + dest_var + " }}"
    assert {k: v for k, v in args.items() if k not in ("src", "dest")} == dict(more)
    assert task["register"] != register  # the probe's name, which the template reads
    assert register in (ROOT / "roles" / src).read_text()


@pytest.mark.parametrize("role, result, differs", [
    ("rdma_ofed", {"drift": False, "rdmaprov_report": ["inbox: 7/7"]}, False),
    ("rdma_ofed", {"drift": True}, True),
    ("rdma_modules", {"changed": False}, False),
    ("rdma_modules", {"changed": True}, True),
    ("net_mtu", {"plan": {"host_drift": False}}, False),
    ("net_mtu", {"plan": {"host_drift": True}}, True),
    ("roce_qos", {"plan": {"drift": []}}, False),
    ("roce_qos", {"plan": {"drift": ["eth1"]}}, True),
    ("firewall", {"plan": {"drift": False}}, False),
    ("container_runtime", {"plan": {"drift": False, "refusal": ""}}, False),
    ("container_runtime", {"plan": {"drift": False, "refusal": "no engine"}}, True),
    ("container_runtime", {"plan": {"drift": True, "refusal": ""}}, True),
    # A probe that failed, was skipped or returned nothing readable is never "in line".
    ("net_mtu", {"failed": True, "msg": "ip -j addr show failed\nmore"}, True),
    ("net_mtu", {"skipped": True}, True),
    ("roce_qos", {"unreachable": True}, True),
])
def test_a_role_is_in_line_only_when_its_own_condition_says_so(role, result, differs):
    why = site_plan().judge(role, result)
    assert (why is not None) == differs, why
    if result.get("failed"):
        assert why == "its probe failed (ip -j addr show failed)"


def test_a_probe_result_that_is_not_readable_is_drift_never_in_line():
    """A result without the field the role's own entry acts on (no plan, a plan of another
    shape, a field missing) is drift: the role then reads the host itself."""
    sp = site_plan()
    for role, result in [("net_mtu", {"plan": None}), ("container_runtime", {"plan": "x"}),
                         ("roce_qos", {}), ("firewall", {"plan": {}}),
                         ("container_runtime", {"plan": {"drift": False}}),
                         ("rdma_ofed", {"rdmaprov_report": []}), ("rdma_modules", {})]:
        why = sp.judge(role, result)
        assert why and why.startswith("its probe's result is not readable"), (role, why)
    assert sp.judge("net_mtu", {"plan": {"host_drift": True}}) == "it differs"


def test_tags_choose_the_roles_and_then_every_role_reads_for_itself():
    sp = site_plan()
    assert not sp.tags_limit(["all"], [])
    assert not sp.tags_limit(None, None)
    assert sp.tags_limit(["net_mtu"], [])
    assert sp.tags_limit(["all"], ["firewall"])


def test_only_net_mtu_s_plan_is_kept_for_the_peers():
    sp = site_plan()
    probe = {"plan": {"verify": {}}, "interfaces": [1]}
    assert sp.kept("net_mtu", probe) == {"plan": {"verify": {}}}
    assert sp.kept("firewall", {"plan": {}}) == {}
    assert sp.unknown_roles(["net_mtu", "nope"]) == ["nope"]


def _event(host, res, task="Read every role; a host in line stops here"):
    return {"event": "runner_on_ok",
            "event_data": {"host": host, "task": task, "task_action": "rdmaprov.cluster.site_plan",
                           "res": res}}


def test_a_host_in_line_reports_each_role_under_its_own_label():
    state = ProgressState()
    state.apply(_event("n1", {"rdmaprov_reports": [
        {"task": "rdma_ofed : in line (read by the site plan)", "lines": ["inbox: 7/7"]},
        {"task": "roce_qos : in line (read by the site plan)", "lines": []},
        {"task": "container_runtime : in line (read by the site plan)",
         "lines": ["a", "b"]}]}))
    assert state.reports["n1"] == [
        ("rdma_ofed : in line (read by the site plan)", ["inbox: 7/7"]),
        ("container_runtime : in line (read by the site plan)", ["a", "b"])]
    # A host with drift reports nothing from the site plan: its roles report for themselves.
    state.apply(_event("n2", {"rdmaprov_reports": [], "drift": True}))
    assert "n2" not in state.reports


def test_a_peer_in_line_gives_its_net_mtu_plan_through_the_site_plan():
    """A host in line ends its play at the site plan, before net_mtu's probe registers its plan:
    a drifting peer's path proof reads the plan the site plan kept (net_mtu_verify), else it
    would leave that peer out of its pings without a word."""
    verify = importlib.import_module(
        "ansible_collections.rdmaprov.cluster.plugins.action.net_mtu_verify")
    mine = {"host_drift": True, "verify": {"name": "n1", "address": "10.0.0.1"}}
    peer = {"host_drift": False, "verify": {"name": "n2", "address": "10.0.0.2"}}
    reg = site_plan().REGISTER
    hostvars = {"n1": {"_net_mtu_probe": {"plan": mine}},
                "n2": {reg: {"drift": False, "probes": {"net_mtu": {"plan": peer}}}},
                "n3": {reg: {"drift": True, "probes": {}}}}
    assert verify._plans(hostvars, ["n1", "n2", "n3", "n4"]) == {"n1": mine, "n2": peer}
