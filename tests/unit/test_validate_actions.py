"""The nccl_validate role's action plugins that run its steps in order: nccl_validate_ready (every
check that can fail a host before the launch, and the gate) and nccl_validate_results (the fresh
result directories before a run, the fetch, the record and the part's line after it), with the
modules they call answered here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from unittest import mock

import pytest

from rdmaprov.collection import validate_launch as vl

ROOT = Path(__file__).resolve().parents[2]
PROBE = "rdmaprov.cluster.nccl_validate_probe"
PREFLIGHT = "rdmaprov.cluster.nccl_validate_preflight"


def _action(monkeypatch, name, args, answers, check_mode=False):
    """The action plugin ``name``; ``answers``: module name -> list of results, in turn."""
    from ansible.plugins.action import ActionBase

    path = ROOT / f"plugins/action/{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_action", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    task = mock.MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    action = module.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None, None, None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        return dict(answers[module_name].pop(0))

    monkeypatch.setattr(action, "_execute_module", execute)
    monkeypatch.setattr(action, "_remove_tmp_path", lambda path: None)
    return action, calls


# --- nccl_validate_ready ----------------------------------------------------------------------

def _plan(tmp_path, port_problem="", keep=True):
    return {"members": ["a", "b"], "own": ["10.0.0.2", "x"],
            "rendezvous": {"members": ["a", "b"], "master_addr": "", "host": "b", "refuse": []},
            "settings": {"label": "fabric"}, "port_problem": port_problem,
            "keep": [vl.kept(str(tmp_path / "b"), "nccl_intended.json", {"A": "1"})] if keep
            else [],
            "worker": [{"name": "worker.py", "src": "/c/worker.py", "dest": "/r/bin/worker.py"},
                       {"name": "rounds.py", "src": "/c/rounds.py", "dest": "/r/bin/rounds.py"}]}


def _vars(plan):
    return {"_probe": {"plan": plan},
            "hostvars": {"a": {"_probe": {"plan": {"own": ["10.0.0.1", "ansible_host"]}}}}}


def _ready_answers(pf_failure="", image=None):
    launch = {"start": ["sh"], "keep": []}
    return {
        PROBE: [{"rendezvous": {"addr": "10.0.0.1", "error": ""}, "routes": {}, "failure": ""}],
        PREFLIGHT: [image or {"changed": True},
                    {"failure": pf_failure, "document": "{}", "exit_code": 0, "host_rdma": {},
                     "keep": [],
                     **({} if pf_failure else {"launch": launch})}],
        "ansible.legacy.file": [{"changed": False}],
    }


def test_ready_runs_the_hosts_checks_in_order(monkeypatch, tmp_path):
    plan = _plan(tmp_path)
    action, calls = _action(monkeypatch, "nccl_validate_ready", {"probe": "_probe"},
                            _ready_answers())
    copies = []
    monkeypatch.setattr(action, "_copy", lambda item, tv: copies.append(item) or {"changed": True})
    out = action.run(task_vars=_vars(plan))
    # The rendezvous host's own address, read from its probe's result.
    assert calls[0] == (PROBE, {"rendezvous": plan["rendezvous"],
                                "own": ["10.0.0.1", "ansible_host"]})
    assert [c[0] for c in calls] == [PROBE, PREFLIGHT, "ansible.legacy.file", PREFLIGHT]
    assert calls[1][1] == {"settings": plan["settings"], "step": "image"}
    assert calls[2][1] == {"path": "/r/bin", "state": "directory", "mode": "0755"}
    assert copies == plan["worker"]
    assert calls[3][1] == {"settings": plan["settings"], "rendezvous": "10.0.0.1"}
    assert out["run"] is True and out["launch"] == {"start": ["sh"], "keep": []}
    assert out["changed"] is True and "failed" not in out
    assert json.loads((tmp_path / "b/nccl_intended.json").read_text()) == {"A": "1"}


def test_ready_stops_at_the_first_line(monkeypatch, tmp_path):
    # The rendezvous: nothing else runs, nothing is kept.
    answers = _ready_answers()
    answers[PROBE] = [{"rendezvous": {"addr": None, "error": "x"}, "failure": "no rendezvous"}]
    action, calls = _action(monkeypatch, "nccl_validate_ready", {"probe": "_probe"}, answers)
    out = action.run(task_vars=_vars(_plan(tmp_path)))
    assert out["failed"] is True and out["msg"] == "no rendezvous" and len(calls) == 1
    assert not (tmp_path / "b").exists()
    # The image.
    answers = _ready_answers(image={"failed": True, "msg": "image x: not on this host"})
    action, calls = _action(monkeypatch, "nccl_validate_ready", {"probe": "_probe"}, answers)
    out = action.run(task_vars=_vars(_plan(tmp_path)))
    assert out["msg"] == "image x: not on this host" and len(calls) == 2
    # The image preflight's line.
    action, calls = _action(monkeypatch, "nccl_validate_ready", {"probe": "_probe"},
                            _ready_answers(pf_failure="torch is not importable: x"))
    monkeypatch.setattr(action, "_copy", lambda item, tv: {"changed": False})
    out = action.run(task_vars=_vars(_plan(tmp_path)))
    assert out["failed"] is True and out["msg"] == "torch is not importable: x"
    assert out["run"] is False and "launch" not in out
    # The port, last: after the preflight ran.
    action, calls = _action(monkeypatch, "nccl_validate_ready", {"probe": "_probe"},
                            _ready_answers())
    monkeypatch.setattr(action, "_copy", lambda item, tv: {"changed": False})
    out = action.run(task_vars=_vars(_plan(tmp_path, port_problem="port in use")))
    assert out["failed"] is True and out["msg"] == "port in use" and out["run"] is False
    assert len(calls) == 4


def test_ready_in_check_mode_runs_no_image_preflight(monkeypatch, tmp_path):
    action, calls = _action(monkeypatch, "nccl_validate_ready", {"probe": "_probe"},
                            _ready_answers(), check_mode=True)
    out = action.run(task_vars=_vars(_plan(tmp_path, keep=False)))
    assert [c[0] for c in calls] == [PROBE] and out["run"] is False and "failed" not in out
    # A rendezvous host without a plan (its probe failed): no own address.
    action, calls = _action(monkeypatch, "nccl_validate_ready", {"probe": "_probe"},
                            _ready_answers(), check_mode=True)
    action.run(task_vars={**_vars(_plan(tmp_path)), "hostvars": {"a": {"_probe": {"failed": 1}}}})
    assert calls[0][1]["own"] is None


def test_ready_needs_a_planned_probe(monkeypatch):
    from ansible.errors import AnsibleActionFail

    action, _calls = _action(monkeypatch, "nccl_validate_ready", {"probe": "_probe"}, {})
    with pytest.raises(AnsibleActionFail, match="_probe holds no nccl_validate_probe plan"):
        action.run(task_vars={"_probe": {"failed": True}})


def test_ready_gate_names_the_hosts_that_failed(monkeypatch):
    action, _calls = _action(monkeypatch, "nccl_validate_ready", {"all_ready": True}, {})
    out = action.run(task_vars={"ansible_play_hosts_all": ["a", "b", "c"],
                                "ansible_play_hosts": ["b"]})
    assert out == {"changed": False, "failed": True,
                   "msg": "not launched: a, c failed the preflight"}
    out = action.run(task_vars={"ansible_play_hosts_all": ["a"], "ansible_play_hosts": ["a"]})
    assert out == {"changed": False}
    assert vl.not_launched(["a", "b"], ["a", "b"]) == ""


def test_worker_dirs_and_own_of():
    copies = vl.worker_copies("/c/worker.py", "/c/rdma_ports.py", "/r")
    assert vl.worker_dirs(copies) == ["/r/bin"]
    assert vl.own_of({"plan": {"own": ["1.2.3.4", "x"]}}) == ["1.2.3.4", "x"]
    assert vl.own_of({"failed": True}) is None and vl.own_of(None) is None


# --- nccl_validate_results: around one launch -------------------------------------------------

def _launch(tmp_path, keep=True):
    res = tmp_path / "res"
    return {"host_paths": [{"path": "/r/fabric", "state": "absent"},
                           {"path": "/r/fabric", "state": "directory"}],
            "controller_paths": [{"path": str(res / "fabric/b"), "state": "directory"},
                                 {"path": str(res / "fabric/.exits/b"), "state": "absent"}],
            "keep": [vl.kept(str(res / "fabric"), "run.json", {"label": "fabric"})] if keep
            else [], "dir": "/r/fabric", "label": "fabric", "timeout": 60,
            "local": str(res / "fabric/b"), "rails_local": ""}


def test_results_fresh_directories_on_the_host_and_the_controller(monkeypatch, tmp_path):
    launch = _launch(tmp_path)
    (tmp_path / "res/fabric/.exits").mkdir(parents=True)
    (tmp_path / "res/fabric/.exits/b").write_text("0\n")
    action, calls = _action(monkeypatch, "nccl_validate_results", {"fresh": launch},
                            {"ansible.legacy.file": [{"changed": True}, {"changed": True}]})
    out = action.run(task_vars={})
    assert calls == [("ansible.legacy.file", {**p, "mode": "0755"}) for p in launch["host_paths"]]
    assert out == {"changed": False, "kept": []}
    assert (tmp_path / "res/fabric/b").is_dir() and not (tmp_path / "res/fabric/.exits/b").exists()
    action, calls = _action(monkeypatch, "nccl_validate_results", {"fresh": launch},
                            {"ansible.legacy.file": [{"failed": True, "msg": "read-only"}]})
    assert action.run(task_vars={}) == {"changed": False, "failed": True, "msg": "read-only",
                                        "kept": []}


def test_results_ended_fetches_records_and_fails_with_the_parts_line(monkeypatch, tmp_path):
    launch = _launch(tmp_path)
    fetch = [{"src": "/r/fabric/rc", "dest": "/c/rc"}, {"src": "/r/fabric/worker.log",
                                                        "dest": "/c/worker.log"}]
    action, calls = _action(monkeypatch, "nccl_validate_results", {"ended": launch}, {
        PROBE: [{"part": {"rc": "2", "reason": "fabric: exit 2", "fetch": fetch}}]})
    got = []
    monkeypatch.setattr(action, "_fetch_one",
                        lambda item, tv: got.append(item) or {"changed": True})
    out = action.run(task_vars={})
    assert calls == [(PROBE, {"result": launch})] and got == fetch
    assert out["failed"] is True and out["msg"] == "fabric: exit 2" and out["changed"] is True
    assert out["part"]["rc"] == "2"
    assert (tmp_path / "res/fabric/run.json").is_file()  # recorded before the host fails
    # A part that passed: no failure; a fetch that fails stops there.
    action, calls = _action(monkeypatch, "nccl_validate_results", {"ended": launch}, {
        PROBE: [{"part": {"rc": "0", "reason": "", "fetch": fetch}}]})
    monkeypatch.setattr(action, "_fetch_one", lambda item, tv: {"changed": False})
    out = action.run(task_vars={})
    assert "failed" not in out and out["changed"] is False
    action, calls = _action(monkeypatch, "nccl_validate_results", {"ended": launch}, {
        PROBE: [{"part": {"rc": "0", "reason": "", "fetch": fetch}}]})
    monkeypatch.setattr(action, "_fetch_one", lambda item, tv: {"failed": True, "msg": "gone"})
    assert action.run(task_vars={})["msg"] == "gone"


def test_results_keeps_files_as_before(monkeypatch, tmp_path):
    files = [vl.kept(str(tmp_path / "d"), "x.json", {"a": 1})]
    action, _calls = _action(monkeypatch, "nccl_validate_results", {"files": files}, {})
    assert action.run(task_vars={}) == {"changed": True, "kept": [files[0]["dest"]]}
    assert action.run(task_vars={}) == {"changed": False, "kept": [files[0]["dest"]]}
