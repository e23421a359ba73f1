"""The rdma_modules role's plan (driver_plan.module_plan, which the kernel_modules module runs
with option settings): the layered lists, the peer-memory rule, the files' lines and the uverbs
check, as the role's vars/main.yml and templates decided them before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.collection import driver_plan as plan

BASE = ["ib_core", "ib_uverbs", "rdma_ucm", "ib_umad", "mlx5_core", "mlx5_ib"]


def settings(**over: object) -> dict:
    """The role's defaults (defaults/main.yml) on a host preflight saw no GPUs and no HCAs on,
    without the files (load_conf, modprobe_conf: test_the_files_of_the_set has them)."""
    s = {"base": BASE, "ipoib": False, "peermem": "auto", "peermem_name": "nvidia_peermem",
         "extra": [], "group_extra": [], "host_extra": [], "load": True, "verify_uverbs": True,
         "has_gpus": False, "has_hcas": False, "load_conf": "", "modprobe_conf": "",
         "managed": "Ansible managed"}
    return {**s, **over}


# --- the peer-memory rule (was _rdma_modules_want_peermem) --------------------------------------
@pytest.mark.parametrize(("peermem", "gpus", "want"), [
    ("present", False, True), ("present", True, True),
    ("auto", True, True), ("auto", False, False),
    ("absent", True, False), ("absent", False, False),
])
def test_wants_peermem(peermem: str, gpus: bool, want: bool) -> None:
    assert plan.wants_peermem(peermem, gpus) is want


def test_defaults_without_gpus_are_the_base_set() -> None:
    got = plan.module_plan(settings())
    assert got["names"] == BASE
    assert got["modules"] == [{"name": n, "state": "present"} for n in BASE]


def test_gpus_add_the_peer_memory_module_after_ipoib() -> None:
    got = plan.module_plan(settings(has_gpus=True, ipoib=True))
    assert got["names"] == [*BASE, "ib_ipoib", "nvidia_peermem"]
    # The legacy name where rdma_modules_peermem_name says so.
    legacy = plan.module_plan(settings(peermem="present", peermem_name="nv_peer_mem"))
    assert legacy["names"][-1] == "nv_peer_mem"


def test_layers_override_the_peermem_rule_and_each_other_in_order() -> None:
    # absent by the rule, present again by a host's own entry (with options).
    got = plan.module_set(settings(host_extra=[{"name": "nvidia-peermem", "options": "x=1"}]))
    assert got[-1] == {"name": "nvidia-peermem", "state": "present", "options": "x=1"}
    # present by the rule, dropped by the group layer.
    got = plan.module_set(settings(peermem="present",
                                   group_extra=[{"name": "nvidia_peermem", "state": "absent"}]))
    assert "nvidia_peermem" not in [e["name"] for e in got]
    # A later layer's fields win; the base set keeps its order; a name's spellings are one.
    got = plan.module_set(settings(ipoib=True, extra=[{"name": "ib-ipoib", "options": "a=1"},
                                                      {"name": "rdma_ucm", "state": "absent"}],
                                   host_extra=[{"name": "mlx5_core", "options": "prof_sel=2"}]))
    assert [e["name"] for e in got] == ["ib_core", "ib_uverbs", "ib_umad", "mlx5_core",
                                        "mlx5_ib", "ib-ipoib"]
    assert got[3]["options"] == "prof_sel=2" and got[5]["options"] == "a=1"


@pytest.mark.parametrize(("hcas", "verify", "want"), [
    (True, True, True), (True, False, False), (False, True, False), (False, False, False)])
def test_uverbs_is_required_on_a_host_with_hcas_only(hcas: bool, verify: bool, want: bool) -> None:
    assert plan.module_plan(settings(has_hcas=hcas, verify_uverbs=verify))["require_uverbs"] is want


def test_load_follows_the_setting() -> None:
    assert plan.module_plan(settings(load=False))["load"] is False
    assert plan.module_plan(settings())["load"] is True


def test_a_bad_entry_is_one_line() -> None:
    with pytest.raises(ValueError, match="not a kernel module name: 'mlx5 core'"):
        plan.module_plan(settings(extra=["mlx5 core"]))


# --- the files' lines (were the templates' loops) -----------------------------------------------
def test_file_lines() -> None:
    entries = [{"name": "ib_core", "state": "present"},
               {"name": "mlx5_core", "state": "present", "options": "prof_sel=2\nx=1"}]
    assert plan.file_lines(entries, "names") == "ib_core\nmlx5_core\n"
    # A value never breaks its line: modprobe runs this directory's install lines in a shell.
    assert plan.file_lines(entries, "options") == "options mlx5_core prof_sel=2 x=1\n"
    assert plan.file_lines(entries[:1], "options") == "# (no options set)\n"


# --- the module, as Ansible runs it (check mode: reads the host, writes and loads nothing) -----
def _run(tmp_path: Path, args: dict) -> dict:
    from rdmaprov.resources import collection_root

    (tmp_path / "ansible_collections" / "rdmaprov").mkdir(parents=True, exist_ok=True)
    link = tmp_path / "ansible_collections" / "rdmaprov" / "cluster"
    if not link.exists():
        link.symlink_to(collection_root())
    module = collection_root() / "plugins" / "modules" / "kernel_modules.py"
    argfile = tmp_path / "args.json"
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {
        **args, "_ansible_check_mode": True, "_ansible_diff": True}}))
    proc = subprocess.run([sys.executable, str(module), str(argfile)], capture_output=True,
                          text=True, check=False,
                          env={"PYTHONPATH": str(tmp_path), "PATH": os.environ["PATH"]})
    return json.loads(proc.stdout)


def test_module_writes_the_plans_set_after_each_header(tmp_path: Path) -> None:
    load_conf, modprobe_conf = tmp_path / "modules.conf", tmp_path / "modprobe.conf"
    got = _run(tmp_path, {
        "settings": settings(has_gpus=True, host_extra=[{"name": "mlx5_core",
                                                         "options": "prof_sel=2"}]),
        "persist": [{"path": str(load_conf), "content": "#\n# Ansible managed\n#",
                     "append": "names"},
                    {"path": str(modprobe_conf), "content": "# options\n", "append": "options"}]})
    assert got["names"] == [*BASE, "nvidia_peermem"], got
    assert [d["after"] for d in got["diff"]] == [
        "#\n# Ansible managed\n#\n" + "".join(f"{n}\n" for n in got["names"]),
        "# options\noptions mlx5_core prof_sel=2\n"]
    assert got["written"] == [str(load_conf), str(modprobe_conf)] and got["changed"] is True
    assert not load_conf.exists() and not modprobe_conf.exists()


def test_module_refuses_a_bad_entry_in_one_line(tmp_path: Path) -> None:
    got = _run(tmp_path, {"settings": settings(host_extra=[{"name": "x", "state": "gone"}])})
    assert got["failed"] is True
    assert got["msg"] == "kernel_modules: x: state must be present or absent, not 'gone'"


def test_module_takes_names_or_settings(tmp_path: Path) -> None:
    got = _run(tmp_path, {"names": ["ib_core"], "settings": settings()})
    assert got["failed"] is True and "mutually exclusive" in got["msg"]
    every_absent = settings(base=[], peermem="absent")
    assert _run(tmp_path, {"settings": every_absent})["msg"] == (
        "the module set is empty (every entry absent?)")


@pytest.mark.parametrize("managed", [
    "Ansible managed", "Managed by ops: do not edit", "line one\nline two", "a\n\nb", "a\n", ""])
def test_the_managed_header_is_what_the_comment_filter_wrote(managed: str) -> None:
    """The role's templates wrote {{ ansible_managed | comment }}: the same text, byte for byte,
    so a host written before is not rewritten."""
    from ansible.plugins.filter.core import comment

    assert plan.managed_comment(managed) == comment(managed)


def test_the_files_of_the_set(tmp_path: Path) -> None:
    s = settings(load_conf="/etc/modules-load.d/rdmaprov.conf",
                 modprobe_conf="/etc/modprobe.d/rdmaprov.conf")
    assert plan.module_plan(s)["files"] == [
        {"path": "/etc/modules-load.d/rdmaprov.conf", "append": "names", "mode": "0644",
         "content": "#\n# Ansible managed\n#\n# RDMA kernel modules loaded at boot by "
                    "systemd-modules-load (rdmaprov.cluster.rdma_modules)."},
        {"path": "/etc/modprobe.d/rdmaprov.conf", "append": "options", "mode": "0644",
         "content": "#\n# Ansible managed\n#\n# Options of the RDMA kernel modules "
                    "(rdmaprov.cluster.rdma_modules). modprobe runs the `install`\n# lines of "
                    "this directory in a shell: a value never breaks its line."}]
    # An empty path keeps no file.
    assert [f["path"] for f in plan.module_plan(settings(modprobe_conf="/m.conf"))["files"]] == [
        "/m.conf"]
    # The module writes them (check mode here: the diff, nothing on disk), before persist's own.
    load_conf, extra = tmp_path / "modules.conf", tmp_path / "extra.conf"
    got = _run(tmp_path, {"settings": settings(load_conf=str(load_conf), managed="ops"),
                          "persist": [{"path": str(extra), "content": "x\n"}]})
    assert [d["after"] for d in got["diff"]] == [
        "#\n# ops\n#\n# RDMA kernel modules loaded at boot by systemd-modules-load "
        "(rdmaprov.cluster.rdma_modules).\n" + "".join(f"{n}\n" for n in BASE), "x\n"]
    assert got["written"] == [str(load_conf), str(extra)] and not load_conf.exists()
