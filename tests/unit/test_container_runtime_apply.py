"""The container_runtime_apply action (plugins/action/container_runtime_apply.py) run by
ansible-playbook on this host (connection local) over steps shaped as plan() makes them
(module_utils/container_runtime.py step()): each through the builtin module's own action, with
check mode, diff, changed and the failure as that module gives them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from rdmaprov import collection

ROOT = Path(__file__).resolve().parents[2]
cr = collection.container_runtime


def run_steps(tmp: Path, steps: list, *flags: str) -> tuple[subprocess.CompletedProcess, list]:
    """The steps as one looped task (as the role runs them); its per-step results."""
    coll = tmp / "ansible_collections" / "rdmaprov"
    coll.mkdir(parents=True, exist_ok=True)
    if not (coll / "cluster").exists():
        (coll / "cluster").symlink_to(ROOT)
    out = tmp / "results.json"
    play = [{"hosts": "all", "gather_facts": False, "vars": {"steps": steps}, "tasks": [
        {"name": "Apply", "rdmaprov.cluster.container_runtime_apply": {"step": "{{ item }}"},
         "loop": "{{ steps }}", "loop_control": {"label": "{{ item.label }}"},
         "register": "applied", "ignore_errors": True},
        {"name": "Keep the results", "ansible.builtin.copy": {
            "content": "{{ applied.results | to_json }}", "dest": str(out)},
         "check_mode": False}]}]
    (tmp / "play.yml").write_text(yaml.safe_dump(play))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(tmp), ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCAL_TEMP=str(tmp / "tmp"),
               ANSIBLE_REMOTE_TEMP=str(tmp / "rtmp"))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i",
                           "localhost,", "-c", "local", str(tmp / "play.yml"), *flags],
                          capture_output=True, text=True, env=env, cwd=tmp, check=False)
    assert out.exists(), proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())


def test_steps_write_and_follow_up_and_rerun_changes_nothing(tmp_path: Path) -> None:
    d, conf, mark = tmp_path / "etc" / "d", tmp_path / "etc" / "d" / "a.conf", tmp_path / "mark"
    own = tmp_path / "own.conf"
    own.write_text("a = 0\n")
    steps = [
        dict(cr.step(str(d), "file", {"path": str(d), "state": "directory", "mode": "0755"}),
             path=str(d)),
        dict(cr.step(str(conf), "copy", {"dest": str(conf), "content": "a = 1\n",
                                         "mode": "0644"}), path=str(conf),
             then=[cr.step("mark", "command", {"argv": ["touch", str(mark)]})]),
        cr.step("b line", "lineinfile", {"path": str(own), "regexp": "^b =", "line": "b = 2",
                                         "insertafter": "EOF"}),
        cr.step("read-only", "command", {"argv": ["true"]}, changed=False),
        cr.step("load", "command", {"argv": ["true"]}, changed=True),
        cr.step("never", "command", {"argv": ["touch", str(tmp_path / "never")]},
                only_if={"argv": ["sh", "-c", "echo none"], "stdout": "package"}),
        cr.step("once", "command", {"argv": ["touch", str(tmp_path / "once")]},
                only_if={"argv": ["sh", "-c", "echo package"], "stdout": "package"}),
    ]
    # --check --diff: nothing written, what would change said, with the modules' diffs; the
    # read-only steps ran (only_if's command), the others under check mode (a command: skipped).
    proc, dry = run_steps(tmp_path, steps, "--check", "--diff")
    assert [r["changed"] for r in dry] == [True, True, True, False, False, False, False], \
        proc.stdout
    assert dry[4]["skipped"]  # changed: true is not said of a command that did not run
    assert not d.exists() and not mark.exists() and own.read_text() == "a = 0\n"
    assert dry[1]["diff"][0]["after"] == "a = 1\n"
    assert dry[2]["diff"][0]["after"] == "a = 0\nb = 2\n"
    assert dry[1]["then"] == [{"label": "mark", "changed": False}]  # a handler under --check
    assert dry[5]["skipped"] and "'none'" in dry[5]["skip_reason"]
    assert dry[6]["skipped"] and "check mode" in dry[6]["msg"] and "skip_reason" not in dry[6]

    proc, first = run_steps(tmp_path, steps)
    assert [r["changed"] for r in first] == [True, True, True, False, True, False, True], \
        proc.stdout
    assert conf.read_text() == "a = 1\n" and oct(conf.stat().st_mode & 0o777) == "0o644"
    assert own.read_text() == "a = 0\nb = 2\n"
    assert mark.exists() and first[1]["then"] == [{"label": "mark", "changed": True}]
    assert (tmp_path / "once").exists() and not (tmp_path / "never").exists()

    # Again: nothing differs, so no follow-up either (the copy is unchanged).
    mark.unlink()
    steps[4]["changed"] = steps[-1]["changed"] = False
    proc, again = run_steps(tmp_path, steps)
    assert [r["changed"] for r in again] == [False] * 7, proc.stdout
    assert not mark.exists() and "then" not in again[1]


def test_a_failing_step_fails_with_the_modules_words(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    steps = [cr.step("dir over a file", "file", {"path": str(tmp_path / "file" / "sub"),
                                                  "state": "directory"}),
             cr.step("follow-up fails", "copy", {"dest": str(tmp_path / "ok"), "content": "1"},
                     then=[cr.step("false", "command", {"argv": ["false"]})])]
    proc, results = run_steps(tmp_path, steps)
    assert results[0]["failed"] and "file" in results[0]["msg"], proc.stdout
    assert results[1]["failed"] and results[1]["rc"] == 1
    assert (tmp_path / "ok").read_text() == "1"
