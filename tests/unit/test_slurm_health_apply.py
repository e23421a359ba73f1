"""The slurm_health role's steps (module_utils/slurm_health.py install_steps, configure_steps,
slurm_conf_steps, slurm_env) and the slurm_health_apply action that runs them as one task:
changed, check mode, diff and a failing step as the builtins give them."""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from rdmaprov.collection import slurm_health as sh

ROOT = Path(__file__).resolve().parents[2]
SHA = "ab" * 32
WHEEL = "rdmaprov-0.2.0-py3-none-any.whl"
APPLY = importlib.import_module("ansible_collections.rdmaprov.cluster.plugins.action."
                                "slurm_health_apply")


def plan(probe=None, controller=None, **over) -> dict:
    """The plan over the role's defaults (as the probe's action passes them) and ``over``."""
    defaults = yaml.safe_load((ROOT / "roles/slurm_health/defaults/main.yml").read_text())
    base = {k[len("slurm_health_"):]: v for k, v in defaults.items()}
    settings = {k: v for k, v in {**base, "host": "node1", "check_mode": False, **over}.items()
                if k in sh.SETTINGS}
    return sh.plan(probe or {}, settings, controller, True)


def test_configure_steps_write_the_files_in_the_roles_order():
    got = plan({"nhc_dir": True}, hooks=["prolog", "healthcheck", "nhc"], script_dir="/s",
               config_dir="/c", nhc_dir="/n")
    assert [(st["module"], st["label"]) for st in got["configure_steps"]] == [
        ("file", "/c"), ("copy", "/c/check.yml"), ("copy", "/c/slurm.env"),
        ("copy", "/s/rdmaprov-prolog.sh"), ("copy", "/s/rdmaprov-healthcheck.sh"),
        ("copy", "/n/rdmaprov.nhc")]
    steps = got["configure_steps"]
    assert steps[0]["args"] == {"path": "/c", "state": "directory", "mode": "0755"}
    assert steps[3]["args"] == {"src": "rdmaprov-prolog.sh", "dest": "/s/rdmaprov-prolog.sh",
                                "mode": "0755"}
    assert steps[5]["args"]["mode"] == "0644" and steps[5]["args"]["src"] == "rdmaprov.nhc"
    assert steps[2]["args"]["content"] == sh.slurm_env(
        {"rdmaprov": "/usr/local/bin/rdmaprov", "config_dir": "/c"})
    # check.yml's text comes from the probe's action (Ansible's to_nice_yaml)
    sh.with_check_yml(got, "# x\nmtu: 1500\n")
    assert got["check_yml"] == "# x\nmtu: 1500\n"
    assert steps[1] == {"module": "copy", "label": "/c/check.yml", "args": {
        "content": "# x\nmtu: 1500\n", "dest": "/c/check.yml", "mode": "0644"}}
    assert [st["label"] for st in plan()["configure_steps"]] == [
        "/etc/rdmaprov", "/etc/rdmaprov/check.yml", "/etc/rdmaprov/slurm.env",
        "/etc/slurm/rdmaprov-prolog.sh"]


def test_install_steps_only_for_the_wheelhouse_and_pip_only_for_a_build_not_in():
    assert plan()["install_steps"] == []
    ctl = {"wheels": [WHEEL], "wheel_sha256": SHA}
    args = {"install": "wheelhouse", "wheelhouse": "wh", "venv": "/opt/r"}
    fresh = plan({"venv_ok": False, "installed": ""}, ctl, **args)
    steps = fresh["install_steps"]
    assert [st["module"] for st in steps] == ["package", "copy", "command", "command", "command",
                                              "copy"]
    assert steps[0]["args"] == {"name": "python3-venv", "state": "present"}
    assert steps[1]["args"] == {"src": "wh/", "dest": "/opt/r-wheelhouse/", "mode": "0644",
                                "directory_mode": "0755"}
    assert steps[2]["args"] == {"argv": ["python3", "-m", "venv", "--system-site-packages",
                                         "/opt/r"], "creates": "/opt/r/bin/python"}
    assert "changed" not in steps[2]
    assert [st["args"]["argv"] for st in steps[3:5]] == fresh["install"]["commands"]
    assert all(st["changed"] is True for st in steps[3:5])
    assert steps[5]["args"] == {"content": SHA, "dest": "/opt/r/.rdmaprov-wheel.sha256",
                                "mode": "0644"}
    same = plan({"venv_ok": True, "installed": SHA}, ctl, **args)["install_steps"]
    assert [st["module"] for st in same] == ["copy", "command", "copy"]


def test_slurm_conf_steps_only_where_the_role_edits_it():
    assert plan()["slurm_conf_steps"] == []
    got = plan({"slurm_conf": ""}, edit_slurm_conf=True, hooks=["prolog", "healthcheck"],
               healthcheck_interval=60)
    assert got["slurm_conf_steps"] == [{"module": "blockinfile", "label": "/etc/slurm/slurm.conf",
                                        "args": {"path": "/etc/slurm/slurm.conf",
                                                 "marker": "# {mark} rdmaprov slurm_health",
                                                 "block": got["conf_block"]}}]


def test_slurm_env_quotes_every_value_and_writes_only_what_is_set():
    base = {"rdmaprov": "/opt/rdmaprov/bin/rdmaprov", "config_dir": "/etc/rdmaprov"}
    assert sh.slurm_env(base) == (
        "#\n# Ansible managed\n#\n# rdmaprov.cluster.slurm_health: read by rdmaprov's Slurm "
        "prolog, health check and NHC plug-in.\nRDMAPROV=/opt/rdmaprov/bin/rdmaprov\n"
        "RDMAPROV_CHECK_CONFIG=/etc/rdmaprov/check.yml\n")
    hostile = "/x; rm -rf / $(id) 'q'"
    text = sh.slurm_env({**base, "rdmaprov": hostile, "config_dir": hostile, "budget": 30,
                         "nccl_python": hostile, "textfile_dir": hostile, "prolog_drain": False,
                         "managed": "Managed\nby ops"})
    assert text.startswith("#\n# Managed\n# by ops\n#\n")
    # What the hooks read when they source the file: each value as given.
    got = subprocess.run(["sh", "-c", text + 'printf "%s\\n" "$RDMAPROV" "$RDMAPROV_CHECK_CONFIG"'
                          ' "$RDMAPROV_CHECK_NCCL_PYTHON" "$RDMAPROV_CHECK_PROMETHEUS"'
                          ' "$RDMAPROV_CHECK_BUDGET" "$RDMAPROV_PROLOG_DRAIN"'],
                         capture_output=True, text=True, check=True).stdout
    assert got.splitlines() == [hostile, hostile + "/check.yml", hostile, hostile, "30", "0"]
    assert f"RDMAPROV={shlex.quote(hostile)}\n" in text


def test_merge_is_changed_when_a_step_changed_and_stops_at_the_first_failure():
    steps = [{"module": "file", "label": "/c"}, {"module": "command", "label": "pip",
                                                 "changed": True},
             {"module": "copy", "label": "/c/x"}]
    ok = APPLY.merge(steps, [{"changed": False}, {"changed": False, "rc": 0},
                             {"changed": True, "diff": [{"before": "a", "after": "b"}]}])
    assert ok["changed"] is True and ok["diff"] == [{"before": "a", "after": "b"}]
    assert [s["changed"] for s in ok["steps"]] == [False, True, True]
    # a command skipped (check mode) changed nothing, as changed_when is not applied to a skip
    skipped = APPLY.merge(steps[1:2], [{"changed": False, "skipped": True}])
    assert skipped["changed"] is False and "failed" not in skipped
    bad = APPLY.merge(steps, [{"changed": True, "diff": {"before": "", "after": "x"}},
                              {"failed": True, "msg": "non-zero return code", "rc": 1,
                               "stderr": "no index"}])
    assert bad["failed"] is True and bad["changed"] is True and bad["rc"] == 1
    assert bad["msg"] == "command pip: non-zero return code" and bad["stderr"] == "no index"
    assert len(bad["steps"]) == 2 and bad["diff"] == [{"before": "", "after": "x"}]


def _apply(tmp_path: Path, steps: list, *flags: str) -> tuple[int, dict]:
    colls = tmp_path / "collections"
    if not colls.exists():
        (colls / "ansible_collections/rdmaprov").mkdir(parents=True)
        (colls / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(colls), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    argv = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", *flags,
            "-m", "rdmaprov.cluster.slurm_health_apply", "-a", json.dumps({"steps": steps})]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path, check=False)
    _, sep, body = proc.stdout.partition("localhost | ")
    assert sep, proc.stdout + proc.stderr
    return proc.returncode, json.loads(body.split("=> ", 1)[1].split("\n\n")[0]
                                       if "=> {" in body else "{}")


def test_the_action_runs_the_builtins_with_check_mode_and_diff(tmp_path: Path):
    conf = tmp_path / "etc"
    (tmp_path / "hook.sh").write_text("#!/bin/sh\n")
    steps = [{"module": "file", "label": str(conf),
              "args": {"path": str(conf), "state": "directory", "mode": "0755"}},
             {"module": "copy", "label": "check.yml",
              "args": {"content": "mtu: 1500\n", "dest": str(conf / "check.yml"),
                       "mode": "0644"}},
             {"module": "copy", "label": "hook",
              "args": {"src": str(tmp_path / "hook.sh"), "dest": str(conf / "hook.sh"),
                       "mode": "0755"}},
             {"module": "command", "label": "touch", "args": {
                 "argv": ["touch", str(conf / "made")], "creates": str(conf / "made")}}]
    rc, res = _apply(tmp_path, steps, "--check")
    assert rc == 0 and not conf.exists(), res  # --check changes nothing
    rc, res = _apply(tmp_path, steps)
    assert rc == 0 and res["changed"] is True, res
    assert (conf / "check.yml").read_text() == "mtu: 1500\n"
    assert oct((conf / "hook.sh").stat().st_mode & 0o777) == "0o755"
    assert (conf / "made").exists()
    rc, res = _apply(tmp_path, steps)
    assert rc == 0 and res["changed"] is False, res
    assert [s["changed"] for s in res["steps"]] == [False] * 4
    # Drift under --check --diff: reported, with the copy's diff, and not written.
    steps[1]["args"]["content"] = "mtu: 9000\n"
    rc, res = _apply(tmp_path, steps, "--check", "--diff")
    assert rc == 0 and res["changed"] is True, res
    assert (conf / "check.yml").read_text() == "mtu: 1500\n"
    # A step that fails stops the rest and names itself.
    steps.insert(1, {"module": "command", "label": "false", "args": {"argv": ["false"]}})
    rc, res = _apply(tmp_path, steps)
    assert rc != 0 and res["msg"] == "command false: non-zero return code", res
    assert (conf / "check.yml").read_text() == "mtu: 1500\n"
    rc, res = _apply(tmp_path, [{"module": "shell", "args": {"cmd": "id"}}])
    assert rc != 0 and "a step is a builtin of copy, package, file" in res["msg"], res
