"""The container_runtime role's rules (plugins/module_utils/container_runtime.py plan()): probe
facts shaped as container_runtime_probe returns them (the RDMA CDI part planned by the real
cdi_spec from a fixture host's sysfs) + the role's settings in, the plan out."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from ansible.plugins.filter.core import FilterModule

from rdmaprov import collection

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
_spec = importlib.util.spec_from_file_location("cdi_make_tree", FIXTURES / "cdi/make_tree.py")
make_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_tree)  # type: ignore[union-attr]

cr = collection.container_runtime
crp = collection.container_runtime_probe
cdi_spec = collection.cdi_spec
FILTERS = FilterModule().filters()

DEFAULTS = yaml.safe_load((ROOT / "roles/container_runtime/defaults/main.yml").read_text())
HOST = "node1"


def settings(**over) -> dict:
    """The role's defaults as preflight.yml passes them (container_runtime_ prefix dropped)."""
    out = {name: DEFAULTS.get("container_runtime_" + name, spec["default"])
           for name, spec in cr.SETTINGS.items()}
    out.update(host=HOST, os_family="Debian", check_mode=False)
    out.update(over)
    return out


# rdmaprov's drop-ins as the role's templates wrote them (ansible_managed at its default).
LIMITS = ("# Ansible managed\n# RDMA pins memory: unlimited locked memory for every login ('*'"
          " does not cover root).\n*    soft memlock unlimited\n*    hard memlock unlimited\n"
          "root soft memlock unlimited\nroot hard memlock unlimited\n")
SYSTEMD = ("# Ansible managed\n# RDMA pins memory: unlimited locked memory for services (the"
           " engine daemons, slurmd).\n[Manager]\nDefaultLimitMEMLOCK=infinity\n")
# memlock host, the engine's pids limit left alone.
PODMAN_HOST = "# Ansible managed\n[containers]\n"


def file_state(texts: dict) -> dict:
    """The probe's file_state (state_drift.read_files) for files with these texts, root 0644."""
    return {path: {"exists": True, "sha1": collection.state_drift.sha1(text.encode()),
                   "mode": "0644", "owner": "root", "group": "root"}
            for path, text in texts.items()}


# A lab node as the probe reads it: podman installed, no GPU, no /dev/infiniband, a hard memlock
# limit it cannot raise (no CAP_SYS_RESOURCE), ext4 under podman's storage, systemd, and
# rdmaprov's drop-ins as a converge with memlock host left them.
LAB_NODE = {
    "engines": {"podman": {"path": "/usr/bin/podman", "version": "4.3.1", "usable": True}},
    "nvidia": {"gpus": 0, "driver": False, "ctk": None, "peermem": False},
    "infiniband_devices": [],
    "memlock": {"soft_kib": 8192, "hard_kib": 8192, "unlimited": False,
                "cap_sys_resource": False, "can_raise": False},
    "pids_controller": True,
    "systemd": True,
    "storage": {"conf": {"path": "/etc/containers/storage.conf", "exists": False},
                "graphroot": "/var/lib/containers/storage", "mount": "/var/lib/containers",
                "fstype": "ext4", "fuse_overlayfs": None, "auto_driver": "",
                "auto_why": "/var/lib/containers/storage is on ext4 (/var/lib/containers)"},
    "images_missing": [],
    "file_state": file_state({DEFAULTS["container_runtime_limits_file"]: LIMITS,
                              DEFAULTS["container_runtime_systemd_dropin"]: SYSTEMD,
                              DEFAULTS["container_runtime_podman_conf"]: PODMAN_HOST}),
}


def facts(**over) -> dict:
    out = copy.deepcopy(LAB_NODE)
    out.update(over)
    return out


@pytest.fixture
def gpu_host(tmp_path: Path, monkeypatch) -> dict:
    """A DGX-like host (4 NDR HCAs, 8 GPUs, podman and docker 26) with the RDMA CDI plan the
    probe makes from its sysfs and NCCL file; the spec not written yet."""
    root = make_tree.dgx_ndr(tmp_path / "root")
    conf = tmp_path / "nccl.conf"
    conf.write_text("# managed\nNCCL_IB_HCA==mlx5_0,mlx5_1\nNCCL_IB_GID_INDEX=3\n")
    real = cdi_spec.read_facts
    monkeypatch.setattr(cdi_spec, "read_facts", lambda conf_path="": real(
        str(root / "sys"), str(root / "dev"), conf_path))
    engines = {"podman": {"path": "/usr/bin/podman", "version": "4.9.3", "usable": True},
               "docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    ib = sorted(str(p) for p in (root / "dev/infiniband").iterdir())
    s = settings(rdma_cdi_spec=str(tmp_path / "rdmaprov-rdma.yaml"), rdma_cdi_nccl_conf=str(conf))
    rdma = crp.rdma_cdi(cr.rdma_cdi_settings(s), engines)
    return {"facts": facts(engines=engines, nvidia={"gpus": 8, "driver": True,
                                                     "ctk": "/usr/bin/nvidia-ctk",
                                                     "peermem": True},
                           infiniband_devices=ib, rdma_cdi=rdma,
                           memlock={"soft_kib": "unlimited", "hard_kib": "unlimited",
                                    "unlimited": True, "cap_sys_resource": True,
                                    "can_raise": True}),
            "settings": s, "ib": ib, "conf": conf}


# -- the engine, the GPU, pids, packages ------------------------------------------------------

def test_auto_engine_is_a_usable_docker_else_podman() -> None:
    docker = {"docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    assert cr.plan(facts(engines=docker), settings())["engine"] == "docker"
    dead = {"docker": {"path": "/usr/bin/docker", "version": None, "usable": False}}
    assert cr.plan(facts(engines=dead), settings())["engine"] == "podman"
    assert cr.plan(facts(engines={}), settings())["engine"] == "podman"
    assert cr.plan(facts(engines=docker), settings(engine="podman"))["engine"] == "podman"
    assert cr.plan(facts(), settings(engine="none"))["engine"] == "none"


@pytest.mark.parametrize(("nvidia", "gpus", "want"), [
    ("auto", 0, False), ("auto", 2, True), (True, 2, True), ("true", 1, True),
    (False, 8, False), ("false", 8, False)])
def test_gpu_setup_follows_the_setting_and_the_gpus(nvidia, gpus, want) -> None:
    plan = cr.plan(facts(nvidia={"gpus": gpus}), settings(nvidia=nvidia))
    assert plan["gpu"] is want
    off = cr.GPU_OFF.format(gpus=gpus)
    assert (cr.NO_GPU in plan["report"]) is (not want and gpus == 0)
    assert (off in plan["report"]) is (not want and gpus > 0)  # the setting, not "no GPU"
    assert plan["install"] is True  # container_runtime_install: true installs the engine anyway
    assert plan["nvidia_cdi"] is want


@pytest.mark.parametrize(("setting", "controller", "want"), [
    ("auto", False, 0), ("auto", True, None), (4096, True, 4096), (4096, False, 4096),
    (None, False, None), ("", True, None)])
def test_pids_limit(setting, controller, want) -> None:
    plan = cr.plan(facts(pids_controller=controller), settings(pids_limit=setting))
    assert cr.pids_limit(setting, controller) == want
    assert plan["pids_limit"] == want
    assert plan["pids_controller"] is controller


def test_packages_by_os_family_and_the_roles_own_lists_win() -> None:
    docker = {"docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    assert cr.plan(facts(), settings())["packages"] == ["podman", "runc"]
    assert cr.plan(facts(engines=docker), settings())["packages"] == ["docker.io"]
    assert cr.plan(facts(engines=docker), settings(os_family="RedHat"))["packages"] == [
        "docker-ce", "docker-ce-cli", "containerd.io"]
    assert cr.plan(facts(), settings(os_family="Suse"))["packages"] == ["podman", "runc"]
    # The OS family's package manager (Debian's where the family has none of its own).
    assert [s["module"] for s in cr.plan(facts(), settings(os_family="Suse"))[
        "install_steps"]] == ["ansible.builtin.apt"]
    assert [s["module"] for s in cr.plan(facts(), settings(os_family="RedHat"))[
        "install_steps"]] == ["ansible.builtin.dnf"]
    assert cr.plan(facts(), settings(podman_packages=["podman-ours"]))["packages"] == [
        "podman-ours"]
    off = cr.plan(facts(), settings(engine="none"))
    assert not off["install_engine"] and not off["install"] and not off["container_engine"]


@pytest.mark.parametrize(("arch", "deb"), [("x86_64", "amd64"), ("aarch64", "arm64")])
def test_nvidias_package_source(arch, deb) -> None:
    src = cr.plan(facts(), settings(architecture=arch))["nvidia_source"]
    assert src == {
        "add": True, "key": True,
        "apt": ("deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit.asc] "
                f"https://nvidia.github.io/libnvidia-container/stable/deb/{deb} /"),
        "yum": "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch"}
    local = cr.plan(facts(), settings(nvidia_repo="local", nvidia_local_repo="deb http://m/ /"))
    assert local["nvidia_source"] == {"add": True, "key": False, "apt": "deb http://m/ /",
                                      "yum": "deb http://m/ /"}
    none = cr.plan(facts(), settings(nvidia_repo="none"))["nvidia_source"]
    assert not none["add"] and not none["key"]


# -- podman's storage ---------------------------------------------------------------------------

def _overlay(fuse: str | None) -> dict:
    """podman's storage as crp.storage() reads it on an overlayfs root."""
    why = ("/var/lib/containers/storage is on overlayfs (/), where podman's overlay driver "
           + (f"cannot work; {fuse} is installed" if fuse
              else "cannot work, and fuse-overlayfs is not installed"))
    return {"conf": {"path": "/etc/containers/storage.conf", "exists": False},
            "graphroot": "/var/lib/containers/storage", "mount": "/", "fstype": "overlay",
            "fuse_overlayfs": fuse, "auto_driver": "fuse-overlayfs" if fuse else "vfs",
            "auto_why": why}


def test_overlayfs_root_gets_fuse_overlayfs_through_the_overlay_driver() -> None:
    plan = cr.plan(facts(storage=_overlay("/usr/bin/fuse-overlayfs")), settings())
    st = plan["storage"]
    assert (st["driver"], st["conf_driver"], st["mount_program"]) == (
        "fuse-overlayfs", "overlay", "/usr/bin/fuse-overlayfs")
    assert st["write_conf"] and st["edits"] == []
    # Written whole where there is none: overlay with fuse-overlayfs as its mount program.
    assert st["conf_text"] == (
        "# Ansible managed\n# containers-storage: where podman keeps images and containers, and"
        ' with which driver.\n[storage]\ndriver = "overlay"\nrunroot = "/run/containers/storage"'
        '\ngraphroot = "/var/lib/containers/storage"\n\n[storage.options.overlay]\n'
        'mount_program = "/usr/bin/fuse-overlayfs"\n')
    assert {"path": "/etc/containers/storage.conf", "mode": "0644",
            "content": st["conf_text"]} in plan["writes"]
    assert plan["packages"] == ["podman", "runc", "fuse-overlayfs"]
    assert plan["drift"] and any("storage driver" in w for w in plan["drift_why"])
    assert st["report"] == ("podman storage: fuse-overlayfs (set by rdmaprov: "
                            "/var/lib/containers/storage is on overlayfs (/), where podman's "
                            "overlay driver cannot work; /usr/bin/fuse-overlayfs is installed)")


def test_a_sites_storage_conf_is_edited_not_replaced() -> None:
    store = _overlay(None)
    store["conf"]["exists"] = True
    store["conf"]["path"] = conf = "/srv/site/storage.conf"
    plan = cr.plan(facts(storage=store), settings())
    st = plan["storage"]
    assert st["driver"] == "vfs" and st["conf_driver"] == "vfs"
    assert not st["write_conf"] and st["conf_text"] is None
    assert "/etc/containers/storage.conf" not in [w["path"] for w in plan["writes"]]
    # Only the driver line, under [storage], in the file the probe read.
    assert st["edits"] == [{"path": conf, "regexp": r"^\s*driver\s*=", "line": 'driver = "vfs"',
                            "after": r"^\[storage\]\s*$"}]
    assert st["mount_program"] == cr.FUSE_MOUNT_PROGRAM
    fuse = cr.plan(facts(storage=store), settings(podman_storage_driver="fuse-overlayfs"))
    # fuse-overlayfs: the overlay driver, and its mount program in [storage.options.overlay]
    # (the section added at the end where the file has none).
    assert fuse["storage"]["edits"] == [
        {"path": conf, "regexp": r"^\s*driver\s*=", "line": 'driver = "overlay"',
         "after": r"^\[storage\]\s*$"},
        {"path": conf, "regexp": r"^\[storage\.options\.overlay\]\s*$",
         "line": "[storage.options.overlay]", "after": "EOF"},
        {"path": conf, "regexp": r"^\s*#?\s*mount_program\s*=",
         "line": f'mount_program = "{cr.FUSE_MOUNT_PROGRAM}"',
         "after": r"^\[storage\.options\.overlay\]\s*$"}]
    assert fuse["storage"]["why"] == "container_runtime_podman_storage_driver is fuse-overlayfs"


def test_podmans_own_choice_on_ext4_is_reported_not_set() -> None:
    plan = cr.plan(facts(), settings())
    st = plan["storage"]
    assert st["driver"] == "" and not st["write_conf"] and st["edits"] == []
    assert st["report"] == ("podman storage: as configured (podman's own choice: "
                            "/var/lib/containers/storage is on ext4 (/var/lib/containers))")
    assert st["failure"] == ("node1: podman cannot use its storage (driver of podman's own "
                             "choice, /var/lib/containers/storage on ext4)")
    # docker keeps no podman storage.
    docker = {"docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    assert cr.plan(facts(engines=docker, storage=_overlay("/usr/bin/fuse-overlayfs")),
                   settings())["storage"]["driver"] == ""


# -- refusals -------------------------------------------------------------------------------------

def test_the_lab_node_refuses_unlimited_memlock_with_the_reason() -> None:
    plan = cr.plan(facts(), settings())
    assert plan["errors"] == [
        "node1: memlock cannot be made unlimited here: hard limit 8192 KiB, no "
        "CAP_SYS_RESOURCE; RDMA needs unlimited locked memory. Set container_runtime_memlock: "
        "host to accept the host's limit here."]
    assert cr.plan(facts(), settings(memlock="host"))["errors"] == []
    kernel = facts(memlock={"hard_kib": 65536, "cap_sys_resource": True, "can_raise": False})
    assert cr.plan(kernel, settings())["errors"][0].endswith(
        "hard limit 65536 KiB, the kernel refused to raise it; RDMA needs unlimited locked "
        "memory. Set container_runtime_memlock: host to accept the host's limit here.")


def test_an_engine_missing_without_install_and_a_gpu_missing_are_refused() -> None:
    plan = cr.plan(facts(engines={}), settings(memlock="host", install=False, nvidia=True))
    assert plan["errors"] == [
        "node1: container engine podman is not installed and container_runtime_install is false",
        "node1: container_runtime_nvidia is true but the host shows no NVIDIA GPU (no "
        "/proc/driver/nvidia/gpus, no /dev/nvidia0): install the driver first"]
    # Installed, or to be installed, or no engine at all: nothing to refuse.
    assert cr.plan(facts(), settings(memlock="host", install=False))["errors"] == []
    assert cr.plan(facts(engines={}), settings(memlock="host"))["errors"] == []
    assert cr.plan(facts(engines={}), settings(memlock="host", install=False,
                                               engine="none"))["errors"] == []


def test_the_refusal_is_every_error_in_one_line() -> None:
    plan = cr.plan(facts(engines={}), settings(install=False, nvidia=True))
    assert len(plan["errors"]) == 3 and plan["refusal"] == "; ".join(plan["errors"])
    assert cr.plan(facts(), settings(memlock="host"))["refusal"] == ""


# -- the install -----------------------------------------------------------------------------------

def test_apt_runs_without_python3_apt_only_outside_check_mode() -> None:
    assert cr.plan(facts(), settings(python_apt=True, check_mode=True))["apt_module"]
    assert cr.plan(facts(), settings(python_apt=False))["apt_module"]
    assert not cr.plan(facts(), settings(python_apt=False, check_mode=True))["apt_module"]
    # The engine through apt: only where it installs the engine at all.
    assert cr.plan(facts(), settings(python_apt=False))["apt_install_engine"]
    assert not cr.plan(facts(), settings(python_apt=False, check_mode=True))["apt_install_engine"]
    assert not cr.plan(facts(), settings(install=False))["apt_install_engine"]


def test_an_index_without_the_engine_is_refreshed_whatever_its_age() -> None:
    def valid(f, **s):
        return cr.plan(f, settings(memlock="host", **s))["apt_cache_valid_time"]
    assert valid(facts(apt_candidate=True)) == DEFAULTS["container_runtime_apt_cache_valid_time"]
    assert valid(facts(apt_candidate=True), apt_cache_valid_time=60) == 60
    assert valid(facts(apt_candidate=False)) == 0
    # Not asked (the probe asks only where apt installs the engine): the setting stands.
    assert valid(facts(), os_family="RedHat") == 3600
    assert valid(facts(), install=False) == 3600
    # The package the probe asks apt about: the engine's first, as the plan installs it.
    assert cr.engine_packages(facts(), settings()) == ["podman", "runc"]
    over = facts(storage=_overlay("/usr/bin/fuse-overlayfs"))
    assert cr.engine_packages(over, settings()) == cr.plan(over, settings())["packages"]
    docker = {"docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    assert cr.engine_packages(facts(engines=docker), settings()) == ["docker.io"]


def test_apt_candidate_reads_apt_cache_policy(monkeypatch) -> None:
    asked = []

    def policy(out):
        monkeypatch.setattr(crp, "run", lambda argv: asked.append(argv) or out)
        return crp.apt_candidate("podman")
    monkeypatch.setattr(crp.shutil, "which", lambda name: "/usr/bin/" + name)
    assert policy("podman:\n  Installed: (none)\n  Candidate: 4.3.1+ds1-8+deb12u1\n")
    assert asked == [["apt-cache", "policy", "podman"]]
    assert not policy("podman:\n  Installed: (none)\n  Candidate: (none)\n")
    assert not policy("") and not policy(None)
    monkeypatch.setattr(crp.shutil, "which", lambda name: None)
    asked.clear()
    assert not policy("Candidate: 1") and asked == []


def test_docker_cli_is_looked_for_only_where_apt_installs_docker_io() -> None:
    docker = facts(engines={})
    assert cr.plan(docker, settings(engine="docker"))["docker_cli_check"]
    assert not cr.plan(docker, settings(engine="docker", docker_packages=["docker-ce"]))[
        "docker_cli_check"]
    assert not cr.plan(docker, settings(engine="docker", os_family="RedHat"))["docker_cli_check"]
    assert not cr.plan(docker, settings(engine="docker", install=False))["docker_cli_check"]
    assert not cr.plan(docker, settings())["docker_cli_check"]
    # --check without python3-apt: the apt module may not run, so nothing would install it.
    assert not cr.plan(docker, settings(engine="docker", check_mode=True, python_apt=False))[
        "docker_cli_check"]
    assert cr.plan(docker, settings(engine="docker", check_mode=True))["docker_cli_check"]


def test_the_missing_images_are_loaded_from_their_files() -> None:
    images = [{"name": "localhost/w:1", "archive": "/srv/w.tar"},
              {"name": "localhost/r:1", "archive": "/srv/r.tar", "format": "rootfs"},
              {"name": "localhost/here:1", "archive": "/srv/here.tar"}]
    plan = cr.plan(facts(images_missing=["localhost/w:1", "localhost/r:1"]),
                   settings(memlock="host", images=images))
    assert plan["images_to_load"] == [
        {"name": "localhost/w:1", "archive": "/srv/w.tar", "format": "auto",
         "argv": ["sh", "-ec", cr.LOAD_SCRIPT, "sh", "podman", "/srv/w.tar", "localhost/w:1",
                  "auto"]},
        {"name": "localhost/r:1", "archive": "/srv/r.tar", "format": "rootfs",
         "argv": ["sh", "-ec", cr.LOAD_SCRIPT, "sh", "podman", "/srv/r.tar", "localhost/r:1",
                  "rootfs"]}]
    # No engine to load them into: no image is copied or loaded.
    none = cr.plan(facts(images_missing=[]), settings(
        memlock="host", engine="none", images=[{**images[0], "src": "/srv/w.tar"}]))
    assert none["images_to_load"] == none["images_to_copy"] == none["image_dirs"] == []


def test_the_load_script_imports_a_rootfs_and_loads_then_tags_an_archive(tmp_path: Path) -> None:
    import subprocess
    import tarfile
    engine = tmp_path / "engine"
    engine.write_text('#!/bin/sh\necho "$@" >> "$0.log"\n'
                      '[ "$1" = load ] && echo "Loaded image: sha256:abc, other"\nexit 0\n')
    engine.chmod(0o755)
    archive, rootfs = tmp_path / "a.tar", tmp_path / "r.tar"
    for path, member in ((archive, "manifest.json"), (rootfs, "etc")):
        (tmp_path / member).write_text("x")
        with tarfile.open(path, "w") as tar:
            tar.add(tmp_path / member, arcname=f"./{member}")

    def load(path: Path, fmt: str) -> subprocess.CompletedProcess:
        argv = ["sh", "-ec", cr.LOAD_SCRIPT, "sh", str(engine), str(path), "n:1", fmt]
        return subprocess.run(argv, capture_output=True, text=True, check=False)

    assert load(archive, "auto").returncode == 0
    assert load(rootfs, "auto").returncode == 0
    assert load(archive, "rootfs").returncode == 0
    assert (tmp_path / "engine.log").read_text().splitlines() == [
        f"load -i {archive}", "tag sha256:abc n:1", f"import {rootfs} n:1", f"import {archive} n:1"]
    # A load that names no image fails with one line.
    engine.write_text('#!/bin/sh\nexit 0\n')
    failed = load(archive, "archive")
    assert failed.returncode == 1 and failed.stderr == f"{archive}: {engine} load named no image\n"


# -- docker's daemon.json -----------------------------------------------------------------------

def _docker(text) -> dict:
    return facts(engines={"docker": {"path": "/usr/bin/docker", "version": "26.1.5",
                                     "usable": True}},
                 daemon_json={"text": text}, nvidia={"gpus": 2},
                 rdma_cdi={"docker_feature": True, "engines": {}, "content": None})


def test_daemon_json_keeps_the_sites_keys_as_the_role_merged_them() -> None:
    current = {"log-driver": "journald", "features": {"buildkit": True},
               "default-ulimits": {"nofile": {"Name": "nofile", "Hard": 1024, "Soft": 1024}}}
    options = {"features": {"containerd-snapshotter": True}, "runtimes": {"x": {"path": "y"}}}
    plan = cr.plan(_docker(json.dumps(current)), settings(
        memlock="host", nvidia_default_runtime=True, docker_daemon_options=options))
    # What the YAML did: combine(recursive=true) of the host's and ours, to_nice_json(indent=2).
    ours = FILTERS["combine"](
        {}, {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}},
        {"default-runtime": "nvidia"}, {"features": {"cdi": True}}, options, recursive=True)
    want = FILTERS["to_nice_json"](FILTERS["combine"](current, ours, recursive=True), indent=2)
    assert plan["daemon_json"] == want + "\n"
    merged = json.loads(plan["daemon_json"])
    assert merged["features"] == {"buildkit": True, "cdi": True, "containerd-snapshotter": True}
    assert merged["log-driver"] == "journald" and "memlock" not in merged["default-ulimits"]
    assert plan["errors"] == [] and plan["engine"] == "docker"
    assert "docker's daemon.json and daemon are not probed" in plan["drift_why"]


def test_daemon_json_absent_gets_rdmaprovs_keys_only() -> None:
    plan = cr.plan(_docker(None), settings(memlock="unlimited", nvidia_mode="cdi",
                                           engine="docker"))
    assert json.loads(plan["daemon_json"]) == {
        "default-ulimits": {"memlock": {"Name": "memlock", "Hard": -1, "Soft": -1}},
        "features": {"cdi": True}}
    assert cr.plan(facts(), settings())["daemon_json"] is None  # podman: no daemon.json


def test_daemon_json_that_is_not_json_is_refused_in_one_line() -> None:
    plan = cr.plan(_docker('{"log-driver": '), settings(memlock="host"))
    assert plan["daemon_json"] is None
    assert len(plan["errors"]) == 1 and plan["errors"][0].startswith(
        "node1: /etc/docker/daemon.json is not valid JSON (")
    assert plan["errors"][0].endswith("): fix or remove it")
    assert cr.plan(_docker("[1]"), settings(memlock="host"))["errors"] == [
        "node1: /etc/docker/daemon.json is not a JSON object: fix or remove it"]
    unreadable = _docker(None)
    unreadable["daemon_json"] = {"error": "Permission denied"}
    assert cr.plan(unreadable, settings(memlock="host"))["errors"] == [
        "node1: /etc/docker/daemon.json: cannot read it: Permission denied"]


# -- drift and the files -------------------------------------------------------------------------

def test_a_converged_lab_node_has_nothing_to_do() -> None:
    plan = cr.plan(facts(), settings(memlock="host"))
    assert not plan["drift"] and plan["drift_why"] == []
    assert plan["dropins"] == [
        {"path": DEFAULTS["container_runtime_limits_file"], "mode": "0644", "content": LIMITS},
        {"path": DEFAULTS["container_runtime_podman_conf"], "mode": "0644",
         "content": PODMAN_HOST}]
    assert plan["systemd_dropin"] == [
        {"path": DEFAULTS["container_runtime_systemd_dropin"], "mode": "0644",
         "content": SYSTEMD}]
    assert plan["writes"] == plan["dropins"] and plan["images_to_load"] == []
    assert plan["dirs"] == ["/etc/security/limits.d", "/etc/systemd/system.conf.d",
                            "/etc/containers/containers.conf.d"]
    # No systemd, docker: neither its drop-in nor podman's.
    docker = {"docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    other = cr.plan(facts(systemd=False, engines=docker), settings(memlock="host"))
    assert [t["path"] for t in other["writes"]] == [DEFAULTS["container_runtime_limits_file"]]
    assert other["systemd_dropin"] == []
    assert other["dirs"] == ["/etc/security/limits.d"] and not other["start_docker"]


def test_the_drop_ins_as_the_templates_wrote_them() -> None:
    podman = DEFAULTS["container_runtime_podman_conf"]

    def conf(f=None, **s):
        return {d["path"]: d["content"] for d in cr.plan(f or facts(), settings(**s))["dropins"]}
    # memlock unlimited: the engine's default ulimits; no pids controller: pids_limit 0, and why.
    assert conf(facts(pids_controller=False))[podman] == (
        '# Ansible managed\n[containers]\n# RDMA pins memory.\ndefault_ulimits = '
        '["memlock=-1:-1"]\n# This host\'s cgroup has no pids controller: any pids limit makes'
        ' every container fail to start.\npids_limit = 0\n')
    assert conf(memlock="host", pids_limit=2048)[podman] == (
        "# Ansible managed\n[containers]\npids_limit = 2048\n")
    # A site's ansible_managed heads each of them.
    mine = conf(memlock="host", managed="managed by the site's Ansible")
    assert mine[DEFAULTS["container_runtime_limits_file"]] == LIMITS.replace(
        "Ansible managed", "managed by the site's Ansible")
    # A drop-in that differs, or is gone, is something to do.
    state = dict(LAB_NODE["file_state"])
    del state[podman]
    changed = {**state, DEFAULTS["container_runtime_limits_file"]: {
        **state[DEFAULTS["container_runtime_limits_file"]], "sha1": "0" * 40}}
    plan = cr.plan(facts(file_state=changed), settings(memlock="host"))
    assert plan["drift_why"] == [f"{DEFAULTS['container_runtime_limits_file']}: content differs",
                                 f"{podman}: not probed"]


def test_each_thing_to_do_is_drift() -> None:
    def why(f=None, **s):
        return cr.plan(f or facts(), settings(memlock="host", **s))["drift_why"]
    dead = {"podman": {"path": "/usr/bin/podman", "version": None, "usable": False}}
    assert why(facts(engines=dead)) == ["podman is not installed (or does not answer)"]
    assert why(facts(engines={}), install=False) == []
    assert why(facts(images_missing=["localhost/w:1"])) == ["image localhost/w:1 is missing"]
    images = [{"name": "localhost/w:1", "src": "/srv/w.tar", "archive": "/srv/img/w.tar"},
              {"name": "docker.io/library/busybox:1.36"}]
    assert why(images=images) == ["image files are copied from the control host"]
    plan = cr.plan(facts(), settings(memlock="host", images=images))
    assert plan["images_to_copy"] == images[:1] and plan["image_dirs"] == ["/srv/img"]


def test_the_rdma_cdi_spec_and_enroots_files_are_written_and_compared(gpu_host) -> None:
    f, s = gpu_host["facts"], gpu_host["settings"]
    plan = cr.plan(f, s)
    spec_path = s["rdma_cdi_spec"]
    assert plan["rdma_cdi_content"] == f["rdma_cdi"]["content"]
    assert plan["files"][0] == {"path": spec_path, "mode": "0644",
                                "content": f["rdma_cdi"]["content"]}
    # Not on the host yet: its file state says so, and so does the CDI plan's own drift.
    assert f"{spec_path}: not probed" in plan["drift_why"]
    # Written as planned (and enroot installed): the same files compare equal.
    Path(spec_path).write_text(f["rdma_cdi"]["content"])
    engines = {**f["engines"], "enroot": {"path": "/usr/bin/enroot", "version": "3.4.1",
                                          "usable": True}}
    rdma = crp.rdma_cdi(cr.rdma_cdi_settings(s), engines)
    assert rdma["drift"] == [] and rdma["enroot"]
    f2 = {**f, "engines": engines, "rdma_cdi": rdma}
    paths = cr.probed_paths(s)
    plan2 = cr.plan(f2, s)
    assert [e["path"] for e in plan2["files"]] == [spec_path, *cr.enroot_paths(s)]
    # Written after the drop-ins, in their directories (the spec's, enroot's two).
    assert plan2["writes"] == plan2["dropins"] + plan2["files"]
    assert plan2["dirs"][-3:] == [str(Path(spec_path).parent), s["enroot_conf_dir"] + "/mounts.d",
                                  s["enroot_conf_dir"] + "/environ.d"]
    assert plan2["remove"] == []
    assert set(paths) >= {spec_path, *cr.enroot_paths(s)}
    written = {e["path"]: e["content"] for e in plan2["files"]}
    state = {**LAB_NODE["file_state"], **file_state(written)}
    plan3 = cr.plan({**f2, "file_state": state}, s)
    assert plan3["drift_why"] == ["docker's daemon.json and daemon are not probed",
                                  "NVIDIA's toolkit and CDI spec are not probed"]


def test_no_rdma_cdi_plans_no_spec() -> None:
    s = settings(rdma_cdi=False, memlock="host")
    assert cr.rdma_cdi_settings(s) == {}
    assert cr.probed_paths(s) == [DEFAULTS["container_runtime_limits_file"],
                                  DEFAULTS["container_runtime_systemd_dropin"],
                                  DEFAULTS["container_runtime_podman_conf"]]
    plan = cr.plan(facts(), s)
    assert plan["files"] == [] and plan["rdma_cdi_content"] is None and plan["remove"] == []
    assert not plan["cdi"]["ready"] and not plan["verify"]["cdi"]


# -- the report ----------------------------------------------------------------------------------

def test_the_lab_nodes_report_lines() -> None:
    plan = cr.plan(facts(), settings(memlock="host"))
    storage = ("podman storage: as configured (podman's own choice: "
               "/var/lib/containers/storage is on ext4 (/var/lib/containers))")
    memlock = ("memlock cannot be made unlimited here: hard limit 8192 KiB, no CAP_SYS_RESOURCE:"
               " containers keep the host limit (engine default ulimits not written)")
    # Nothing converges: the plan's line for podman's storage.
    assert plan["report"] == [cr.NO_GPU, cr.NO_IB, memlock, storage]
    # Something converges: podman info reports the storage then, so the plan's line goes; not
    # under --check, where podman is not asked.
    gone = facts(images_missing=["localhost/w:1"])
    assert cr.plan(gone, settings(memlock="host"))["report"] == [cr.NO_GPU, cr.NO_IB, memlock]
    assert cr.plan(gone, settings(memlock="host", check_mode=True))["report"] == plan["report"]
    tail = ("podman container: not checked: container_runtime_verify_image is empty, so memlock"
            " and /dev/infiniband inside containers are unproven on this host")
    empty = cr.plan(facts(), settings(memlock="host", verify_image=""))
    assert empty["report"][-1] == tail
    assert cr.plan(gone, settings(memlock="host", verify_image=""))["report"][-1] == tail
    assert not empty["verify"]["run"]


def test_a_gpu_host_reports_the_spec_and_an_engine_without_cdi(gpu_host) -> None:
    f, s = gpu_host["facts"], gpu_host["settings"]
    plan = cr.plan(f, s)
    assert plan["report"][0] == f"RDMA CDI spec {s['rdma_cdi_spec']}: " + "; ".join(
        f["rdma_cdi"]["report"])
    assert plan["cdi"]["ready"] and plan["errors"] == []
    old = {**f, "engines": {"docker": {"path": "/usr/bin/docker", "version": "24.0.5",
                                       "usable": True}}}
    old["rdma_cdi"] = crp.rdma_cdi(cr.rdma_cdi_settings(s), old["engines"])
    plan = cr.plan(old, s)
    assert not plan["cdi"]["ready"] and not plan["verify"]["cdi"]
    assert ("RDMA CDI spec: docker 24.0.5 has no CDI (docker >= 25 has): pass the devices with "
            "--device /dev/infiniband/... instead") in plan["report"]


# -- the check container ---------------------------------------------------------------------------

def test_check_container_through_the_spec(gpu_host) -> None:
    f, s = gpu_host["facts"], gpu_host["settings"]
    s = {**s, "engine": "podman", "images": [{"name": s["verify_image"], "archive": "/srv/b.tar"}],
         "verify_args": ["--security-opt", "label=disable"]}
    v = cr.plan(f, s)["verify"]
    assert v["run"] and v["cdi"]
    assert v["argv"] == ["timeout", "-k", "5", "120", "podman", "run", "--rm", "--pull", "never",
                         "--network", "host", "--ipc", "host", "--device",
                         "rdmaprov.io/rdma=all", "--security-opt", "label=disable",
                         s["verify_image"], "sh", "-c", cr.CHECK_SCRIPT]
    nodes = f["rdma_cdi"]["spec"]["devices"][0]["containerEdits"]["deviceNodes"]
    assert v["wanted_ib"] == sorted(Path(n["path"]).name for n in nodes)
    assert v["wanted_nccl"] == ["NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_0,mlx5_1"]
    assert v["label"] == "podman container with rdmaprov.io/rdma=all" and v["hint"] == ""
    assert v["wanted"] == (" through rdmaprov.io/rdma=all; wanted [" + " ".join(
        Path(n["path"]).name for n in nodes) + "] and [NCCL_IB_HCA==mlx5_0,mlx5_1, "
        f"NCCL_IB_GID_INDEX=3] (the host's {gpu_host['conf']})")
    host = cr.plan(f, {**s, "memlock": "host"})["verify"]["argv"]
    assert host[14:18] == ["rdmaprov.io/rdma=all", "--ulimit", "host", "--security-opt"]
    # The NCCL file the spec mounts is gone: the check passes the devices one by one instead.
    gone = copy.deepcopy(f)
    gone["rdma_cdi"]["nccl_conf"]["exists"] = False
    assert cr.plan(gone, s)["cdi"]["ready"] and not cr.plan(gone, s)["verify"]["cdi"]


def test_check_container_with_the_devices_one_by_one(gpu_host) -> None:
    f = facts(infiniband_devices=gpu_host["ib"])
    v = cr.plan(f, settings(memlock="host", rdma_cdi=False))["verify"]
    assert not v["cdi"]
    assert v["argv"][:14] == ["timeout", "-k", "5", "120", "podman", "run", "--rm", "--pull",
                              "missing", "--network", "host", "--cap-add", "IPC_LOCK",
                              "--ulimit"]
    assert v["argv"][14] == "host"
    assert [a for a in v["argv"] if a.startswith("--device=")] == [
        "--device=" + d for d in gpu_host["ib"]]
    assert v["wanted_ib"] == sorted(Path(d).name for d in gpu_host["ib"])
    assert v["wanted"] == f"; the host has {len(gpu_host['ib'])} RDMA device files"
    assert v["start_failure"] == ("node1: a podman container with image "
                                  "docker.io/library/busybox:1.36 did not start")
    assert v["hint"] == cr.NO_REGISTRY
    assert v["memlock_note"] == (" (memlock cannot be made unlimited here: hard limit 8192 KiB,"
                                 " no CAP_SYS_RESOURCE)")
    docker = {"docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    unlimited = cr.plan(facts(engines=docker), settings(rdma_cdi=False))["verify"]["argv"]
    assert unlimited[4] == "docker" and unlimited[11:15] == ["--cap-add", "IPC_LOCK", "--ulimit",
                                                            "memlock=-1:-1"]
    host_docker = cr.plan(facts(engines=docker), settings(rdma_cdi=False, memlock="host"))
    assert "--ulimit" not in host_docker["verify"]["argv"]
    assert not cr.plan(facts(), settings(check_mode=True))["verify"]["run"]
    # container_runtime_verify false: no check container.
    assert cr.plan(facts(), settings())["verify"]["run"]
    assert not cr.plan(facts(), settings(verify=False))["verify"]["run"]


# -- what the check container and podman info say (container_runtime_verify) ----------------------

def _check_out(memlock: str, ib: str, nccl: list[str] = (), conf: str = "") -> str:
    return "\n".join([f"memlock={memlock}", f"ib={ib}", f"conf={conf}"]
                     + [f"nccl={n}" for n in nccl]) + "\n"


def test_the_check_container_is_judged_on_what_it_saw(gpu_host) -> None:
    lab = cr.plan(facts(), settings(memlock="host", rdma_cdi=False))["verify"]
    # The lab node: no /dev/infiniband, the host's limit.
    assert cr.judge_check(lab, 0, _check_out("8192", ""), "") == (None, (
        "podman container: ulimit -l 8192 (memlock cannot be made unlimited here: hard limit 8192"
        " KiB, no CAP_SYS_RESOURCE); /dev/infiniband: not applicable on this host: no"
        " /dev/infiniband"))
    # Did not start: the last line it said, or none; timed out; the registry hint.
    assert cr.judge_check(lab, 125, "", "Trying to pull\nError: no such host\n\n") == ((
        "node1: a podman container with image docker.io/library/busybox:1.36 did not start"
        " (exit 125): Error: no such host" + cr.NO_REGISTRY), "")
    assert cr.judge_check(lab, 124, "", "")[0].endswith("(timed out): no message" + cr.NO_REGISTRY)
    # Devices it should not see.
    assert cr.judge_check(lab, 0, _check_out("8192", "uverbs0 "), "")[0] == (
        "node1: the container sees memlock 8192, /dev/infiniband [uverbs0]; the host has 0 RDMA"
        " device files")
    # Through the spec: the devices, the NCCL settings and unlimited memlock, in any order.
    f, s = gpu_host["facts"], gpu_host["settings"]
    v = cr.plan(f, {**s, "engine": "podman"})["verify"]
    ib = " ".join(reversed(v["wanted_ib"])) + " "
    nccl = list(reversed(v["wanted_nccl"]))
    failure, report = cr.judge_check(v, 0, _check_out("unlimited", ib, nccl, "/etc/nccl.conf"), "")
    assert failure is None and report == (
        f"podman container with rdmaprov.io/rdma=all: ulimit -l unlimited; /dev/infiniband:"
        f" {ib.strip()}; /etc/nccl.conf: 2 NCCL settings, as on the host"
        " (NCCL_CONF_FILE=/etc/nccl.conf)")
    failure, _ = cr.judge_check(v, 0, _check_out("8192", ib, nccl[:1]), "")
    assert failure == (f"node1: the container sees memlock 8192, /dev/infiniband [{ib.strip()}]"
                       f" and NCCL settings [{nccl[0]}]" + v["wanted"])
    assert cr.judge_check(v, 0, _check_out("unlimited", ib, nccl[:1]), "")[0] is not None


def test_podmans_storage_is_judged_on_what_podman_info_said() -> None:
    st = cr.plan(facts(), settings(memlock="host"))["storage"]
    assert st["ask_podman"] and st["info_argv"] == ["podman", "info", "--format",
                                                    "{{.Store.GraphDriverName}}"]
    assert not cr.plan(facts(), settings(check_mode=True))["storage"]["ask_podman"]
    assert cr.judge_storage(st, 0, "overlay\n", "") == (None, (
        "podman storage: overlay (podman's own choice: /var/lib/containers/storage is on ext4"
        " (/var/lib/containers))"))
    assert cr.judge_storage(st, 0, "", "")[1] == st["report"]
    said = "time=x level=error\nError: 'overlay' is not supported over overlayfs\n"
    assert cr.judge_storage(st, 125, "", said) == ((
        "node1: podman cannot use its storage (driver of podman's own choice,"
        " /var/lib/containers/storage on ext4): Error: 'overlay' is not supported over overlayfs;"
        " set container_runtime_podman_storage_driver (vfs works on any filesystem)"), "")
    assert cr.judge_storage(st, 2, "", "")[0].startswith(st["failure"] + ": exit 2; set")


def test_the_verify_module_runs_the_argv_and_fails_in_one_line(tmp_path) -> None:
    import subprocess
    import sys

    (tmp_path / "ansible_collections" / "rdmaprov").mkdir(parents=True)
    (tmp_path / "ansible_collections" / "rdmaprov" / "cluster").symlink_to(ROOT)

    def run(args):
        argfile = tmp_path / "args.json"
        argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        module = ROOT / "plugins/modules/container_runtime_verify.py"
        proc = subprocess.run([sys.executable, str(module), str(argfile)],
                              capture_output=True, text=True, check=False,
                              env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
        return json.loads(proc.stdout)

    v = cr.plan(facts(), settings(memlock="host", rdma_cdi=False))["verify"]
    ok = run({"verify": {**v, "argv": ["sh", "-c", "printf 'memlock=8192\\nib=\\nconf=\\n'"]}})
    assert ok["msg"].startswith("podman container: ulimit -l 8192 (memlock cannot")
    assert ok["rdmaprov_report"] == [ok["msg"]] and not ok.get("failed") and not ok["changed"]
    bad = run({"verify": {**v, "argv": ["sh", "-c", "echo oops >&2; exit 3"]}})
    assert bad["failed"] and bad["msg"].endswith("did not start (exit 3): oops" + cr.NO_REGISTRY)
    st = cr.plan(facts(), settings(memlock="host"))["storage"]
    gone = run({"storage": {**st, "info_argv": [str(tmp_path / "no-podman"), "info"]}})
    assert gone["failed"] and gone["msg"] == st["failure"] + (
        ": exit 2; set container_runtime_podman_storage_driver (vfs works on any filesystem)")
    assert run({"storage": {**st, "info_argv": ["echo", "vfs"]}})["msg"].startswith(
        "podman storage: vfs (podman's own choice")
    assert run({"verify": v, "_ansible_check_mode": True})["skipped"]
    assert run({"verify": {}})["msg"] == "container_runtime verify: the plan has no 'argv'"


# -- the module takes the table -----------------------------------------------------------------

def test_the_modules_settings_option_is_the_table() -> None:
    module = ROOT / "plugins/modules/container_runtime_probe.py"
    ns: dict = {}
    text = module.read_text()
    head = text[:text.index("from ansible.module_utils")]
    exec(head.split("from __future__ import annotations")[1], ns)
    doc = yaml.safe_load(ns["DOCUMENTATION"])["options"]["settings"]["suboptions"]
    # The plan's keys, as the module's RETURN names them.
    said = yaml.safe_load(ns["RETURN"])["plan"]["description"][0].split("Keys: ")[1]
    assert said.rstrip(".").split(", ") == list(cr.plan(facts(), settings()))
    assert list(doc) == list(cr.SETTINGS)
    for name, spec in cr.argument_spec().items():
        assert doc[name]["type"] == spec["type"], name
        assert doc[name].get("default") == spec.get("default"), name
        assert doc[name].get("elements") == spec.get("elements"), name
    # Every setting is one of the role's variables, with the role's default (or a fact, or
    # check_mode, or the host); the probe's action plugin fills them from the role's variables
    # (tests/unit/test_role_settings.py holds each to a source).
    for name in cr.SETTINGS:
        if name not in ("host", "os_family", "check_mode", "architecture", "managed",
                        "python_apt"):
            # pids_limit has none in the module: null is a value (leave the limit alone).
            want = DEFAULTS["container_runtime_" + name] if name != "pids_limit" else None
            assert cr.SETTINGS[name]["default"] == want, name


def test_the_modules_spec_keeps_a_null_pids_limit_and_fills_the_rest() -> None:
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    spec = {"settings": {"type": "dict", "options": cr.argument_spec()}}
    got = ArgumentSpecValidator(spec).validate(
        {"settings": {"pids_limit": None, "install": "no", "verify_timeout": "30"}})
    assert not got.error_messages
    s = got.validated_parameters["settings"]
    assert s["pids_limit"] is None and s["install"] is False and s["verify_timeout"] == 30
    assert s["engine"] == "auto" and s["memlock"] == "unlimited"
    assert cr.plan(facts(pids_controller=False), {**s, "memlock": "host"})["pids_limit"] is None


# -- the steps the role's apply tasks run (action container_runtime_apply) ---------------------

def _modules(steps: list) -> list[tuple[str, str]]:
    return [(s["module"].rsplit(".", 1)[1], s["label"]) for s in steps]


def test_install_steps_on_debian_podman_docker_and_a_gpu_host() -> None:
    podman = cr.plan(facts(), settings())
    assert podman["install_steps"] == [{
        "label": "engine: podman runc", "module": "ansible.builtin.apt",
        "args": {"name": ["podman", "runc"], "state": "present", "update_cache": True,
                 "cache_valid_time": 0}}]  # no apt candidate read: refresh the index
    fresh = cr.plan(facts(apt_candidate=True), settings(apt_cache_valid_time=600))
    assert fresh["install_steps"][0]["args"]["cache_valid_time"] == 600

    docker = {"docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    plan = cr.plan(facts(engines=docker, apt_candidate=True), settings())
    assert _modules(plan["install_steps"]) == [
        ("apt", "engine: docker.io"),
        ("apt", "docker's client (docker-cli), where packaged apart"),
        ("systemd_service", "docker started")]
    cli = plan["install_steps"][1]
    assert cli["args"] == {"name": "docker-cli", "state": "present"}
    assert cli["only_if"] == {"argv": ["sh", "-c", cr.DOCKER_CLI_SCRIPT], "stdout": "package"}
    assert plan["install_steps"][2]["args"] == {"name": "docker", "state": "started",
                                                "enabled": True}
    # The site's own docker packages stay as given: no docker-cli looked for.
    own = cr.plan(facts(engines=docker), settings(docker_packages=["docker-ce"]))
    assert [s["label"] for s in own["install_steps"]] == ["engine: docker-ce", "docker started"]

    gpu = cr.plan(facts(nvidia={"gpus": 2}, apt_candidate=True),
                  settings(nvidia_packages=["nvidia-container-toolkit", "x"]))
    assert _modules(gpu["install_steps"]) == [
        ("apt", "engine: podman runc"), ("get_url", "NVIDIA's signing key"),
        ("copy", "NVIDIA's (or a local) package source"),
        ("apt", "NVIDIA: nvidia-container-toolkit x")]
    key, source, toolkit = gpu["install_steps"][1:]
    assert key["args"] == {"url": "https://nvidia.github.io/libnvidia-container/gpgkey",
                           "dest": cr.NVIDIA_KEYRING, "mode": "0644"}
    assert source["args"] == {"dest": "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
                              "mode": "0644", "content": gpu["nvidia_source"]["apt"]}
    assert toolkit["args"] == {"name": ["nvidia-container-toolkit", "x"], "state": "present",
                               "update_cache": True}
    local = cr.plan(facts(nvidia={"gpus": 2}), settings(nvidia_repo="local",
                                                        nvidia_local_repo="deb http://m/ /"))
    assert [s["label"] for s in local["install_steps"]][1:] == [
        "NVIDIA's (or a local) package source", "NVIDIA: nvidia-container-toolkit"]
    none = cr.plan(facts(nvidia={"gpus": 2}), settings(nvidia_repo="none"))
    assert [s["label"] for s in none["install_steps"]][1:] == ["NVIDIA: nvidia-container-toolkit"]


def test_install_steps_without_python_apt_under_check_and_without_install() -> None:
    # Without python3-apt the apt module installs it, which --check must not.
    dry = cr.plan(facts(nvidia={"gpus": 2}), settings(python_apt=False, check_mode=True))
    assert _modules(dry["install_steps"]) == [("get_url", "NVIDIA's signing key"),
                                              ("copy", "NVIDIA's (or a local) package source")]
    assert cr.plan(facts(), settings(python_apt=False))["install_steps"][0]["module"] \
        == "ansible.builtin.apt"
    # Nothing to install: no package step, docker still started where it is the engine.
    docker = {"docker": {"path": "/usr/bin/docker", "version": "26.1.5", "usable": True}}
    off = cr.plan(facts(engines=docker), settings(install=False))
    assert [s["label"] for s in off["install_steps"]] == ["docker started"]
    assert cr.plan(facts(), settings(engine="none"))["install_steps"] == []
    # No systemd: docker is not started by the role.
    assert cr.plan(facts(engines=docker, systemd=False), settings(install=False))[
        "install_steps"] == []


def test_install_steps_on_redhat() -> None:
    plan = cr.plan(facts(nvidia={"gpus": 1}), settings(os_family="RedHat"))
    assert _modules(plan["install_steps"]) == [
        ("dnf", "engine: podman runc"), ("yum_repository", "NVIDIA's package source"),
        ("dnf", "NVIDIA: nvidia-container-toolkit")]
    assert plan["install_steps"][1]["args"] == {
        "name": "nvidia-container-toolkit", "description": "NVIDIA container toolkit",
        "baseurl": cr.NVIDIA_RPM_URL,
        "gpgkey": "https://nvidia.github.io/libnvidia-container/gpgkey", "gpgcheck": True}
    none = cr.plan(facts(nvidia={"gpus": 1}), settings(os_family="RedHat", nvidia_repo="none"))
    assert _modules(none["install_steps"])[1:] == [("dnf", "NVIDIA: nvidia-container-toolkit")]


def test_configure_steps_write_what_the_plan_renders_in_order() -> None:
    plan = cr.plan(facts(), settings())
    steps = plan["configure_steps"]
    dirs = [s for s in steps if s["args"].get("state") == "directory"]
    assert [s["path"] for s in dirs] == plan["dirs"]
    assert all(s["module"] == "ansible.builtin.file" and s["args"]["mode"] == "0755"
               for s in dirs)
    written = plan["writes"] + plan["systemd_dropin"]
    copies = steps[len(dirs):len(dirs) + len(written)]
    assert [(s["path"], s["args"]) for s in copies] == [
        (w["path"], {"dest": w["path"], "content": w["content"], "mode": w["mode"]})
        for w in written]
    assert [s["label"] for s in copies] == [s["path"] for s in copies]
    # The lab node cannot raise its hard limit: systemd is not re-executed (PID 1 would log a
    # failed setrlimit), and nothing else follows a step.
    assert not any("then" in s for s in steps)
    # No RDMA CDI plan read (no spec to write): the spec is removed, last.
    assert [s["args"] for s in steps[len(dirs) + len(written):]] == [
        {"path": DEFAULTS["container_runtime_rdma_cdi_spec"], "state": "absent"}]


def test_configure_steps_reexec_systemd_where_the_limit_can_be_raised(gpu_host) -> None:
    plan = cr.plan(gpu_host["facts"], gpu_host["settings"])
    dropin = DEFAULTS["container_runtime_systemd_dropin"]
    by_path = {s["path"]: s for s in plan["configure_steps"]}
    assert by_path[dropin]["then"] == [{"label": "re-execute systemd",
                                        "module": "ansible.builtin.systemd_service",
                                        "args": {"daemon_reexec": True}}]
    assert [s["path"] for s in plan["configure_steps"] if "then" in s] == [
        dropin, "/etc/docker/daemon.json"]
    # The RDMA CDI spec as rendered, byte for byte.
    spec = gpu_host["settings"]["rdma_cdi_spec"]
    assert by_path[spec]["args"] == {"dest": spec, "content": plan["rdma_cdi_content"],
                                     "mode": "0644"}
    # docker (auto: a usable docker): daemon.json, docker restarted where it changed.
    daemon = by_path["/etc/docker/daemon.json"]
    assert daemon["args"] == {"dest": "/etc/docker/daemon.json", "content": plan["daemon_json"],
                              "mode": "0644"}
    assert daemon["then"] == [{"label": "restart docker",
                               "module": "ansible.builtin.systemd_service",
                               "args": {"name": "docker", "state": "restarted"}}]
    # NVIDIA's CDI spec: generated under --check too (read-only there), installed where it differs.
    generate, install = plan["configure_steps"][-2:]
    assert generate["args"] == {"argv": ["nvidia-ctk", "cdi", "generate", "--output",
                                         cr.NVIDIA_CDI_TMP]}
    assert generate["check_mode"] is False and generate["changed"] is False
    assert install["args"] == {"src": cr.NVIDIA_CDI_TMP, "remote_src": True,
                               "dest": "/etc/cdi/nvidia.yaml", "mode": "0644"}
    runtime = cr.plan(gpu_host["facts"], {**gpu_host["settings"], "nvidia_mode": "runtime"})
    # docker's nvidia runtime only: no NVIDIA CDI spec.
    assert not runtime["nvidia_cdi"]
    assert {s["path"] for s in runtime["configure_steps"]}.isdisjoint(
        {cr.NVIDIA_CDI_TMP, "/etc/cdi/nvidia.yaml"})


def test_configure_steps_edit_a_sites_storage_conf_and_remove_an_empty_spec() -> None:
    conf = "/etc/containers/storage.conf"
    storage = dict(LAB_NODE["storage"], conf={"path": conf, "exists": True},
                   fstype="overlay", auto_driver="vfs", auto_why="overlayfs")
    plan = cr.plan(facts(storage=storage), settings())
    edits = [s for s in plan["configure_steps"] if s["module"] == "ansible.builtin.lineinfile"]
    assert [s["args"] for s in edits] == [
        {"path": e["path"], "regexp": e["regexp"], "line": e["line"], "insertafter": e["after"]}
        for e in plan["storage"]["edits"]]
    assert edits and [s["path"] for s in edits] == [conf] * len(edits)
    # An RDMA CDI spec with nothing to put in it: removed.
    spec = DEFAULTS["container_runtime_rdma_cdi_spec"]
    empty = cr.plan(facts(rdma_cdi={"content": None}), settings())
    assert empty["remove"] == [spec]
    assert empty["configure_steps"][-1] == {"label": spec, "module": "ansible.builtin.file",
                                            "args": {"path": spec, "state": "absent"},
                                            "path": spec}


def test_image_steps_copy_then_load_the_missing_ones() -> None:
    images = [{"name": "localhost/a:1", "src": "/ctl/a.tar", "archive": "/var/cache/x/a.tar"},
              {"name": "localhost/b:1", "archive": "/srv/b.tar", "format": "rootfs"}]
    plan = cr.plan(facts(images_missing=["localhost/b:1"]), settings(images=images))
    assert plan["image_steps"] == [
        {"label": "/var/cache/x", "module": "ansible.builtin.file",
         "args": {"path": "/var/cache/x", "state": "directory", "mode": "0755"}},
        {"label": "/var/cache/x/a.tar", "module": "ansible.builtin.copy",
         "args": {"src": "/ctl/a.tar", "dest": "/var/cache/x/a.tar", "mode": "0644"}},
        {"label": "localhost/b:1", "module": "ansible.builtin.command",
         "args": {"argv": plan["images_to_load"][0]["argv"]}, "changed": True}]
    assert cr.plan(facts(), settings(engine="none", images=images))["image_steps"] == []
