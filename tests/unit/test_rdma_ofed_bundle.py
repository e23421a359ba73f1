"""The rdma_ofed_bundle action (plugins/action/rdma_ofed_bundle.py): the bundle path's steps run
in order, a failure stops them with driver_versions.bundle_failure's line, an ISO is unmounted
whatever happened, a bundle on the control host is checked before any step, and --check says
what it would do."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from unittest import mock

import pytest

from rdmaprov.collection import driver_versions as versions

PKG = "ansible_collections.rdmaprov.cluster.plugins"
NAME = "MLNX_OFED_LINUX-24.10-1.1.4.0-debian12.1-x86_64"


def _settings(src: str, sha256: str) -> dict:
    return {"source": "mlnx_ofed", "inbox_packages": [], "inbox_extra_packages": [],
         "inbox_version": "", "doca_packages": [], "doca_version": "", "doca_repo_url": "",
         "doca_gpg_key_url": "", "doca_repo_trusted": False, "mlnx_ofed_src": src,
         "mlnx_ofed_sha256": sha256, "mlnx_ofed_version": "",
         "mlnx_ofed_workdir": "/var/cache/rdmaprov/mlnx_ofed", "restart_openibd": False,
         "reboot_ok": False, "allow_connection_interface_down": False, "os_name": "Debian 12.5",
         "ssh_interface": "eth0", "ssh_interface_rdma": False, "os_family": "Debian",
         "distribution": "Debian", "distribution_major_version": "12",
         "mlnx_ofed_flags": ["--force"], "python_apt": True, "check_mode": False}


def bundle(src: str, sha256: str = "ab" * 32) -> dict:
    return versions.plan(_settings(src, sha256), {"versions": {}, "ofed": None})["bundle"]


def run(monkeypatch, args: dict, check: bool, answers: dict) -> tuple[dict, list]:
    """The action's result and the steps it ran (name, builtin), each answered from ``answers``
    (by step name; {"changed": False} where it has none)."""
    from ansible.plugins.action import ActionBase

    action_mod = importlib.import_module(f"{PKG}.action.rdma_ofed_bundle")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    task = mock.MagicMock()
    task.args, task.check_mode = args, check
    action = action_mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None, None, None)
    ran = []
    by_args = {}
    for step in versions.bundle_steps(args["bundle"], check) + versions.bundle_cleanup(
            args["bundle"], check):
        by_args[repr(step["args"])] = step["name"]

    def step(self_step, task_vars):
        name = by_args[repr(self_step["args"])]
        ran.append((name, self_step["action"]))
        return answers.get(name, {"changed": False})

    monkeypatch.setattr(action, "_step", step)
    monkeypatch.setattr(action, "_remove_tmp_path", lambda path: None)
    return action.run(task_vars={}), ran


def test_a_fetched_tarball_is_installed_and_changes(monkeypatch) -> None:
    b = bundle(f"https://mirror/{NAME}.tgz")
    got, ran = run(monkeypatch, {"bundle": b}, False, {
        "Fetch the bundle and check its sha256": {"changed": True, "diff": {"after": "x"}}})
    assert ran == [("Create the work directory", "file"),
                   ("Fetch the bundle and check its sha256", "get_url"),
                   ("Unpack the tarball", "unarchive"), ("Run mlnxofedinstall", "command")]
    assert got["changed"] is True and not got.get("failed")
    assert got["diff"] == [{"after": "x"}]


def test_a_failed_fetch_stops_before_the_installer(monkeypatch) -> None:
    b = bundle(f"file:///root/{NAME}.tgz")
    got, ran = run(monkeypatch, {"bundle": b}, False, {
        "Fetch the bundle and check its sha256": {"failed": True, "msg": "checksum did not match"}})
    assert [name for name, _ in ran] == ["Create the work directory",
                                         "Fetch the bundle and check its sha256"]
    assert got["failed"] is True and got["msg"] == (
        "rdma_ofed: Fetch the bundle and check its sha256 failed: checksum did not match; "
        "nothing was installed")


def test_an_iso_is_unmounted_even_when_the_installer_fails(monkeypatch, tmp_path: Path) -> None:
    iso = tmp_path / f"{NAME}.iso"
    iso.write_bytes(b"iso\n")
    b = bundle(str(iso), hashlib.sha256(b"iso\n").hexdigest())
    got, ran = run(monkeypatch, {"bundle": b}, False, {
        "Run mlnxofedinstall": {"failed": True, "msg": "non-zero return code",
                                "stderr_lines": ["Error: unsupported kernel"]}})
    assert [name for name, _ in ran] == [
        "Create the work directory", "Copy the verified bundle to the node",
        "Create the mount point", "Mount the ISO", "Run mlnxofedinstall", "Unmount the ISO"]
    # The installer ran: the line does not say nothing was installed.
    assert got["failed"] is True and got["msg"] == (
        "rdma_ofed: Run mlnxofedinstall failed: non-zero return code Error: unsupported kernel")


def test_a_bundle_on_the_control_host_is_checked_before_any_step(monkeypatch,
                                                                 tmp_path: Path) -> None:
    tgz = tmp_path / f"{NAME}.tgz"
    tgz.write_bytes(b"not a bundle\n")
    got, ran = run(monkeypatch, {"bundle": bundle(str(tgz), "0" * 64)}, False, {})
    assert ran == [] and got["failed"] is True
    assert got["msg"].startswith(f"rdma_ofed: sha256 mismatch for {tgz}: expected {'0' * 64}")


@pytest.mark.parametrize("changed", [True, False])
def test_check_mode_checks_the_copy_and_says_what_it_would_install(monkeypatch, tmp_path: Path,
                                                                   changed: bool) -> None:
    tgz = tmp_path / f"{NAME}.tgz"
    tgz.write_bytes(b"bundle\n")
    b = bundle(str(tgz), hashlib.sha256(b"bundle\n").hexdigest())
    got, ran = run(monkeypatch, {"bundle": b}, True, {
        "Copy the verified bundle to the node": {"changed": changed}})
    assert [name for name, _ in ran] == ["Create the work directory",
                                         "Copy the verified bundle to the node"]
    assert got["changed"] is changed and not got.get("failed")
    assert got["msg"] == (f"would install MLNX_OFED 24.10-1.1.4.0 from {tgz} (installed: none)")


def test_a_builtin_actions_skip_or_failure_is_the_steps_result(monkeypatch) -> None:
    """unarchive ends with an exception where its installer is already there (creates), copy
    where it cannot read its source: each becomes that step's result, not the task's."""
    from ansible.errors import AnsibleActionFail, AnsibleActionSkip

    action_mod = importlib.import_module(f"{PKG}.action.rdma_ofed_bundle")
    task = mock.MagicMock()
    loader = mock.MagicMock()
    action = action_mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None, None)
    action._shared_loader_obj = loader  # ansible.plugins.loader itself in ansible-core 2.19
    unpack = {"name": "Unpack the tarball", "action": "unarchive", "args": {"src": "/x.tgz"}}
    loader.action_loader.get.return_value.run.side_effect = AnsibleActionSkip("skipped, since y")
    assert action._step(unpack, {}) == {"skipped": True, "msg": "skipped, since y"}
    loader.action_loader.get.return_value.run.side_effect = AnsibleActionFail("no such file")
    assert action._step(unpack, {}) == {"failed": True, "msg": "no such file"}
    name, kwargs = loader.action_loader.get.call_args
    assert name == ("ansible.legacy.unarchive",) and kwargs["task"].args == {"src": "/x.tgz"}


def test_the_builtins_really_run_a_local_bundle_on_this_host(tmp_path: Path) -> None:
    """ansible-playbook on this host (connection local), no step mocked: the file module, the
    copy and unarchive actions (plugin_utils/builtin_step.py) and the command module run a
    tarball bundle whose mlnxofedinstall records its flags; --check first changes nothing."""
    import json
    import os
    import subprocess
    import sys
    import tarfile

    import yaml

    root = Path(__file__).resolve().parents[2]
    stage = tmp_path / "stage" / NAME
    stage.mkdir(parents=True)
    mark = tmp_path / "installed"
    installer = stage / "mlnxofedinstall"
    installer.write_text(f'#!/bin/sh\necho "$@" > {mark}\n')
    installer.chmod(0o755)
    tgz = tmp_path / f"{NAME}.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(stage, arcname=NAME)
    work = tmp_path / "work"
    b = versions.plan({**_settings(str(tgz), hashlib.sha256(tgz.read_bytes()).hexdigest()),
                       "mlnx_ofed_workdir": str(work)}, {"versions": {}, "ofed": None})["bundle"]
    coll = tmp_path / "ansible_collections" / "rdmaprov"
    coll.mkdir(parents=True)
    (coll / "cluster").symlink_to(root)
    out = tmp_path / "result.json"
    play = [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Install", "rdmaprov.cluster.rdma_ofed_bundle": {"bundle": b},
         "register": "got", "ignore_errors": True},
        {"name": "Keep", "ansible.builtin.copy": {"content": "{{ got | to_json }}",
                                                  "dest": str(out)}, "check_mode": False}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(tmp_path), ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_REMOTE_TEMP=str(tmp_path / "rt"))

    def play_once(*flags: str) -> dict:
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i",
                               "localhost,", "-c", "local", str(tmp_path / "play.yml"), *flags],
                              capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
        assert out.exists(), proc.stdout + proc.stderr
        return json.loads(out.read_text())

    got = play_once("--check")
    assert not got.get("failed") and got["msg"] == b["would"], got
    assert not work.exists() and not mark.exists()
    got = play_once()
    assert not got.get("failed") and got["changed"] is True, got
    assert mark.read_text().split() == ["--force"]
    assert (work / f"{NAME}.tgz").read_bytes() == tgz.read_bytes()
