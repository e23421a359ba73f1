"""container_runtime against real lab nodes: podman installed and configured, the lab image
loaded from its tarball, a real container checked; re-apply changes nothing; --check is clean.

The lab cannot raise the hard memlock limit (no CAP_SYS_RESOURCE): the default policy must say
so per host, and policy `host` must pass while reporting the limit.

Air-gapped and overlayfs hosts: a node whose /var/lib/containers is on its overlayfs root (the
lab otherwise bind-mounts an ext4 directory there), with the check image made on the control
host from its own binaries (a rootfs tarball, and a docker archive), copied and loaded."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from rdmaprov.engine import RunnerSession, RunSpec
from rdmaprov.progress import report_lines

pytestmark = pytest.mark.lab

LAB_VARS = {
    "container_runtime_engine": "podman",
    "container_runtime_memlock": "host",
    "container_runtime_verify_image": "localhost/rdmaprov-lab-worker:latest",
    "container_runtime_images": [{"name": "localhost/rdmaprov-lab-worker:latest",
                                  "archive": "/srv/rdmaprov-images/lab-worker.tar"}],
}


def apply(lab, tmp: Path, extravars: dict, check: bool = False, events: list | None = None,
          limit: str | None = None):
    book = tmp / "container_runtime.yml"
    book.write_text("- hosts: all\n  gather_facts: false\n  roles:\n"
                    "    - rdmaprov.cluster.container_runtime\n")
    spec = RunSpec(playbook=book, inventory=lab.inventory, extravars=extravars,
                   host_count=len(lab.nodes), check=check, limit=limit)
    sink = events if events is not None else []
    return RunnerSession(spec, on_event=sink.append).run()


def _debug_msgs(events: list, task: str) -> dict[str, str]:
    out = {}
    for ev in events:
        d = ev.get("event_data") or {}
        if ev.get("event") == "runner_on_ok" and d.get("task") == task:
            out[d["host"]] = str((d.get("res") or {}).get("msg"))
    return out


# The role's reports (the refusal assert's and the storage check's success lines), per host.
REPORT = "container_runtime : Refuse what cannot be set up here, or report what does not apply"
STORAGE = "container_runtime : Assert podman's storage works"


def _reports(events: list, task: str) -> dict[str, list[str]]:
    out = {}
    for ev in events:
        d = ev.get("event_data") or {}
        lines = report_lines(ev)
        if lines and f"{d.get('role')} : {d.get('task')}" == task:
            out[d["host"]] = lines
    return out


def storage_line(lab, node: str, first: str = "") -> str:
    """What the role must say of the node's /var/lib/containers: the filesystem there decides
    (the lab's node directory, bind-mounted: ext4 on a usual host, tmpfs or another filesystem
    where the lab keeps its nodes elsewhere; overlayfs needs another driver). Read by findmnt in
    the node, independently of the role's own reader. ``first``: the driver podman ran, as the
    first apply reports it; empty: "as configured" (a re-apply)."""
    fstype = lab.exec(node, ["findmnt", "-n", "-o", "FSTYPE", "-T",
                             "/var/lib/containers"]).stdout.strip()
    point = lab.exec(node, ["findmnt", "-n", "-o", "TARGET", "-T",
                            "/var/lib/containers"]).stdout.strip()
    if fstype == "overlay":
        pytest.skip(f"{node}'s /var/lib/containers is on overlayfs: "
                    "test_overlayfs_root_gets_a_storage_driver_that_works covers that case")
    return (f"podman storage: {first or 'as configured'} (podman's own choice: "
            f"/var/lib/containers/storage is on {fstype} ({point}))")


def test_unlimited_memlock_is_refused_with_the_reason(lab, tmp_path: Path) -> None:
    # The default policy (unlimited), explicitly: the lab's group_vars accept the host limit.
    result = apply(lab, tmp_path, {"container_runtime_engine": "podman",
                                   "container_runtime_memlock": "unlimited"})
    assert set(result.failed_hosts) == set(lab.nodes)
    for name in lab.nodes:
        msg = result.hosts[name].failure.message
        assert "memlock cannot be made unlimited here: hard limit" in msg
        assert "no CAP_SYS_RESOURCE" in msg


def test_apply_reapply_check(lab, tmp_path: Path) -> None:
    # The role acts (and proves a container) only where something differs: take away one of its
    # drop-ins, so the first apply has work whatever ran on the lab before this test.
    for node in lab.nodes:
        lab.exec(node, ["rm", "-f", "/etc/containers/containers.conf.d/90-rdmaprov.conf"])
    events: list = []
    first = apply(lab, tmp_path, LAB_VARS, events=events)
    assert first.ok, {h: r.failure for h, r in first.hosts.items()}
    seen = _debug_msgs(events, "Report what a container gets here")
    assert set(seen) == set(lab.nodes)
    for msg in seen.values():
        assert PODMAN_SEEN.match(msg), msg
        assert "not applicable on this host: no /dev/infiniband" in msg
    # The lab's own directory under /var/lib/containers: podman's own driver, left alone.
    storage = _reports(events, STORAGE)
    assert set(storage) == set(lab.nodes)
    for node, lines in storage.items():
        assert lines == [storage_line(lab, node, first="overlay")]
    # podman ran the check, so the first report leaves its storage out.
    assert not any(line.startswith("podman storage:")
                   for lines in _reports(events, REPORT).values() for line in lines)

    again_events: list = []
    again = apply(lab, tmp_path, LAB_VARS, events=again_events)
    assert again.ok and all(r.changed == 0 for r in again.hosts.values())
    # Nothing differs: no install, configure or check container, and the reports still come.
    assert _debug_msgs(again_events, "Report what a container gets here") == {}
    again_reports = _reports(again_events, REPORT)
    assert set(again_reports) == set(lab.nodes)
    for node, lines in again_reports.items():
        assert "/dev/infiniband in containers: not applicable on this host: no /dev/infiniband" \
            in lines
        assert storage_line(lab, node) in lines
    assert _reports(again_events, STORAGE) == {}
    dry = apply(lab, tmp_path, LAB_VARS, check=True)
    assert dry.ok and all(r.changed == 0 for r in dry.hosts.values())

    node = lab.nodes[0]
    conf = lab.exec(node, ["cat", "/etc/containers/containers.conf.d/90-rdmaprov.conf"]).stdout
    assert "pids_limit = 0" in conf and "default_ulimits" not in conf
    limits = lab.exec(node, ["cat", "/etc/security/limits.d/90-rdmaprov-memlock.conf"]).stdout
    assert "root hard memlock unlimited" in limits
    dropin = lab.exec(node, ["cat", "/etc/systemd/system.conf.d/90-rdmaprov-memlock.conf"]).stdout
    assert "DefaultLimitMEMLOCK=infinity" in dropin
    ran = lab.exec(node, ["podman", "run", "--rm", "--network", "host",
                          "localhost/rdmaprov-lab-worker:latest", "sh", "-c", "ulimit -l"])
    assert ran.stdout.strip() == "8192"


# -- air-gapped, overlayfs root ----------------------------------------------------------------

CHECK_IMAGE = "localhost/rdmaprov-check:latest"


# What the check container reports: through the RDMA CDI device once nccl_env has written the
# host's nccl.conf (an earlier test's bootstrap on the shared lab), else with the device files.
PODMAN_SEEN = re.compile(r"podman container( with rdmaprov\.io/rdma=all)?: ulimit -l 8192")


def check_rootfs(dest: Path) -> Path:
    """A root filesystem tarball with this machine's own sh, ls and tr and the libraries they
    load: what the check container runs, made with no registry."""
    files = {"bin/sh": str(Path(shutil.which("sh") or "/bin/sh").resolve())}
    for binary in ("ls", "tr"):
        path = shutil.which(binary)
        assert path, binary
        files[f"bin/{binary}"] = path
        ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
        files.update({word.lstrip("/"): word for line in ldd.splitlines()
                      for word in line.split() if word.startswith("/")})
    with tarfile.open(dest, "w", dereference=True) as tar:
        for arcname, source in sorted(files.items()):
            tar.add(source, arcname=arcname)
    return dest


def docker_archive(rootfs: Path, dest: Path, repo_tag: str) -> Path:
    """`docker save`'s layout (manifest.json, an image config, one layer tar) around rootfs."""
    layer = rootfs.read_bytes()
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [repo_tag],
                            "Layers": ["layer/layer.tar"]}]).encode()
    with tarfile.open(dest, "w") as tar:
        for name, data in (("manifest.json", manifest), (config_name, config),
                           ("layer/layer.tar", layer)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return dest


@pytest.fixture
def overlayfs_node(lab):
    """The last node with /var/lib/containers on its overlayfs root; rebooted afterwards, which
    brings the lab's ext4 directory back."""
    node = lab.nodes[-1]
    lab.exec(node, ["umount", "/var/lib/containers"])
    lab.exec(node, ["rm", "-rf", "/var/lib/containers/storage", "/etc/containers/storage.conf"])
    assert lab.exec(node, ["stat", "-f", "-c", "%T", "/var/lib/containers"]).stdout.strip() \
        == "overlayfs"
    try:
        yield node
    finally:
        lab.exec(node, ["rm", "-rf", "/var/lib/containers/storage",
                        "/etc/containers/storage.conf"], check=False)
        lab.lab.restart(node, log=lambda msg: None)


def test_overlayfs_root_gets_a_storage_driver_that_works(lab, overlayfs_node, tmp_path: Path):
    node = overlayfs_node
    rootfs = check_rootfs(tmp_path / "check-rootfs.tar")
    airgap = {**LAB_VARS, "container_runtime_verify_image": CHECK_IMAGE,
              "container_runtime_images": [{"name": CHECK_IMAGE, "src": str(rootfs),
                                            "archive": "/var/cache/rdmaprov/check-rootfs.tar"}]}

    # The overlay driver, asked for: the run fails with podman's own words.
    bad = apply(lab, tmp_path, {**airgap, "container_runtime_podman_storage_driver": "overlay"},
                limit=node)
    failure = bad.hosts[node].failure
    assert failure is not None
    assert failure.task == "container_runtime : Assert podman's storage works"
    assert "'overlay' is not supported over overlayfs, a mount_program is required" \
        in failure.message
    assert "set container_runtime_podman_storage_driver" in failure.message

    # auto: vfs, since fuse-overlayfs is not installed; the image comes from the control host.
    events: list = []
    first = apply(lab, tmp_path, airgap, events=events, limit=node)
    assert first.ok, first.hosts[node].failure
    storage = _reports(events, STORAGE)[node][0]
    assert storage.startswith("podman storage: vfs (set by rdmaprov: /var/lib/containers/storage "
                              "is on overlayfs (/), where podman's overlay driver cannot work")
    conf = lab.exec(node, ["cat", "/etc/containers/storage.conf"]).stdout
    assert 'driver = "vfs"' in conf
    seen = _debug_msgs(events, "Report what a container gets here")[node]
    assert PODMAN_SEEN.match(seen), seen

    again = apply(lab, tmp_path, airgap, limit=node)
    assert again.ok and again.hosts[node].changed == 0, again.hosts[node]
    dry = apply(lab, tmp_path, airgap, check=True, limit=node)
    assert dry.ok and dry.hosts[node].changed == 0, dry.hosts[node]


def test_check_image_from_a_docker_archive_or_none(lab, tmp_path: Path) -> None:
    node = lab.nodes[0]
    archive = docker_archive(check_rootfs(tmp_path / "rootfs.tar"), tmp_path / "check.tar",
                             "localhost/saved-under-another-name:1")
    name = "localhost/rdmaprov-check-archive:latest"
    lab.exec(node, ["podman", "rmi", "-f", name], check=False)
    airgap = {**LAB_VARS, "container_runtime_verify_image": name,
              "container_runtime_images": [{"name": name, "src": str(archive),
                                            "archive": "/var/cache/rdmaprov/check.tar"}]}
    events: list = []
    first = apply(lab, tmp_path, airgap, events=events, limit=node)
    assert first.ok, first.hosts[node].failure
    seen = _debug_msgs(events, "Report what a container gets here")[node]
    assert PODMAN_SEEN.match(seen), seen
    again = apply(lab, tmp_path, airgap, limit=node)
    assert again.ok and again.hosts[node].changed == 0, again.hosts[node]

    # No image at all: no check container, and the report says what went unproven.
    events = []
    none = apply(lab, tmp_path, {**LAB_VARS, "container_runtime_verify_image": "",
                                 "container_runtime_images": []}, events=events, limit=node)
    assert none.ok and none.hosts[node].changed == 0
    assert ("podman container: not checked: container_runtime_verify_image is empty, so memlock "
            "and /dev/infiniband inside containers are unproven on this host") \
        in _reports(events, REPORT)[node]


# -- the RDMA CDI spec: what a job's container gets ---------------------------------------------

CDI_SPEC = "/etc/cdi/rdmaprov-rdma.yaml"
# The task that writes what the plan renders: the drop-ins, storage.conf, the spec, enroot's.
SPEC_TASK = ("container_runtime : Write the drop-ins, storage.conf, the RDMA CDI spec and"
             " enroot's files")


def apply_with_nccl_env(lab, tmp: Path, extravars: dict, check: bool = False,
                        events: list | None = None, limit: str | None = None):
    """nccl_env, then container_runtime, as site.yml orders them (the spec mounts nccl.conf)."""
    book = tmp / "nccl_env_container_runtime.yml"
    book.write_text("- hosts: all\n  gather_facts: false\n  roles:\n"
                    "    - rdmaprov.cluster.nccl_env\n    - rdmaprov.cluster.container_runtime\n")
    spec = RunSpec(playbook=book, inventory=lab.inventory, extravars=extravars,
                   host_count=len(lab.nodes), check=check, limit=limit)
    sink = events if events is not None else []
    return RunnerSession(spec, on_event=sink.append).run()


def _changed_tasks(events: list, host: str) -> list[str]:
    return [f"{d.get('role')} : {d.get('task')}" for ev in events
            for d in [ev.get("event_data") or {}]
            if ev.get("event") == "runner_on_ok" and d.get("host") == host
            and (d.get("res") or {}).get("changed")]


def _changed_items(events: list, host: str, task: str) -> list[str]:
    """The items (their paths) a looped task changed on the host."""
    return [str(((d.get("res") or {}).get("item") or {}).get("path")) for ev in events
            for d in [ev.get("event_data") or {}]
            if ev.get("event") == "runner_item_on_ok" and d.get("host") == host
            and f"{d.get('role')} : {d.get('task')}" == task
            and (d.get("res") or {}).get("changed")]


def user_run(lab, node: str, engine: str) -> list[str]:
    """A user's container: only the CDI device for RDMA and NCCL, as docs/containers.md says."""
    return lab.exec(node, [engine, "run", "--rm", "--network", "host", "--ipc", "host",
                           "--device", "rdmaprov.io/rdma=all",
                           "localhost/rdmaprov-lab-worker:latest", "sh", "-c",
                           "cat /etc/nccl.conf; echo NCCL_CONF_FILE=$NCCL_CONF_FILE; "
                           "echo memlock=$(ulimit -l)"]).stdout.splitlines()


def test_cdi_spec_gives_a_users_container_the_hosts_nccl_settings(lab, tmp_path: Path) -> None:
    node = lab.nodes[0]
    events: list = []
    first = apply_with_nccl_env(lab, tmp_path, LAB_VARS, events=events, limit=node)
    assert first.ok, first.hosts[node].failure
    # No HCA in the lab: the spec still carries the NCCL file and its variable.
    assert ("RDMA CDI spec /etc/cdi/rdmaprov-rdma.yaml: no RDMA device: the spec carries only "
            "the NCCL settings") in _reports(events, REPORT)[node]
    host_conf = lab.exec(node, ["cat", "/etc/nccl.conf"]).stdout
    assert "NCCL_SOCKET_IFNAME=" in host_conf
    seen = user_run(lab, node, "podman")
    assert "\n".join(seen[:-2]) == host_conf.rstrip("\n")
    assert seen[-2:] == ["NCCL_CONF_FILE=/etc/nccl.conf", "memlock=8192"]
    spec = lab.exec(node, ["cat", CDI_SPEC]).stdout
    assert 'cdiVersion: "0.3.0"' in spec and 'kind: "rdmaprov.io/rdma"' in spec

    again = apply_with_nccl_env(lab, tmp_path, LAB_VARS, limit=node)
    assert again.ok and again.hosts[node].changed == 0, again.hosts[node]

    # A removed spec is drift: --check --diff says so, changes nothing; the next apply restores it.
    lab.exec(node, ["rm", CDI_SPEC])
    dry_events: list = []
    dry = apply_with_nccl_env(lab, tmp_path, LAB_VARS, check=True, events=dry_events, limit=node)
    assert dry.ok
    assert _changed_tasks(dry_events, node) == [SPEC_TASK]
    assert _changed_items(dry_events, node, SPEC_TASK) == [CDI_SPEC]
    assert lab.exec(node, ["test", "-e", CDI_SPEC], check=False).returncode == 1
    fixed = apply_with_nccl_env(lab, tmp_path, LAB_VARS, limit=node)
    assert fixed.ok and lab.exec(node, ["cat", CDI_SPEC]).stdout == spec


def test_docker_node_beside_podman(lab, tmp_path: Path) -> None:
    """docker on one node (Debian's docker.io, from the lab's own repository, as
    `reconfigure --set container_runtime_engine=docker` would install it), podman on the others:
    both converge, a re-run changes nothing, and docker older than 25 is told it cannot read the
    spec. The check container's capabilities are the lab's (group_vars: lab_inventory
    verify_args, a lab node cannot give CAP_MKNOD)."""
    node = lab.nodes[-1]
    fresh = lab.exec(node, ["sh", "-c", "command -v docker"], check=False).returncode != 0
    docker = {**LAB_VARS, "container_runtime_engine": "docker"}
    try:
        _docker_node(lab, tmp_path, node, docker, fresh)
    finally:
        # The lab is shared by the whole session: later tests' roles pick the engine a node
        # has. (Two purges: Debian 12 has no docker-cli package, and one unknown name makes
        # apt-get purge nothing.)
        lab.exec(node, ["sh", "-c", "export DEBIAN_FRONTEND=noninteractive; for p in docker.io "
                        "docker-cli; do apt-get purge -y -q $p >/dev/null 2>&1; done; rm -rf "
                        "/etc/docker"], check=False)


def _docker_node(lab, tmp_path: Path, node: str, docker: dict, fresh: bool) -> None:
    events: list = []
    first = apply_with_nccl_env(lab, tmp_path, docker, events=events, limit=node)
    assert first.ok, first.hosts[node].failure
    if fresh:  # the probe ran before the install: it cannot know docker's version yet
        assert ("RDMA CDI spec: docker is not installed yet: whether it reads the spec shows "
                "once it is (the next run)") in _reports(events, REPORT)[node]
    version = lab.exec(node, ["docker", "version", "--format", "{{.Server.Version}}"]).stdout
    major = int(version.split(".")[0])
    daemon = json.loads(lab.exec(node, ["cat", "/etc/docker/daemon.json"]).stdout)
    again_events: list = []
    again = apply_with_nccl_env(lab, tmp_path, docker, events=again_events, limit=node)
    assert again.ok and again.hosts[node].changed == 0, again.hosts[node]
    # The re-run's check container: a first run that installed docker could not know its version.
    seen = _debug_msgs(again_events, "Report what a container gets here")[node]
    reports = _reports(again_events, REPORT)[node]
    if major < 25:
        assert seen.startswith("docker container: ulimit -l 8192")
        assert (f"RDMA CDI spec: docker {version.strip()} has no CDI (docker >= 25 has): pass the "
                "devices with --device /dev/infiniband/... instead") in reports
    else:
        assert daemon["features"]["cdi"] is True
        assert seen.startswith("docker container with rdmaprov.io/rdma=all: ulimit -l 8192")


def test_enroot_gets_the_nccl_file_and_variable(lab, tmp_path: Path) -> None:
    """enroot is not packaged in Debian: a stand-in `enroot` on PATH makes the role take the
    host for an enroot host; what is tested is the files it writes (formats: unit tests)."""
    node = lab.nodes[0]
    shim = "/usr/local/bin/enroot"
    lab.exec(node, ["sh", "-c", f"printf '#!/bin/sh\\necho 3.5.0\\n' > {shim}; chmod +x {shim}"])
    try:
        first = apply_with_nccl_env(lab, tmp_path, LAB_VARS, limit=node)
        assert first.ok, first.hosts[node].failure
        fstab = lab.exec(node, ["cat", "/etc/enroot/mounts.d/90-rdmaprov-rdma.fstab"]).stdout
        assert ("/etc/nccl.conf /etc/nccl.conf none "
                "x-create=file,bind,ro,nosuid,nodev,noexec,private") in fstab
        environ = lab.exec(node, ["cat", "/etc/enroot/environ.d/90-rdmaprov-rdma.env"]).stdout
        assert "NCCL_CONF_FILE=/etc/nccl.conf" in environ.splitlines()
        again = apply_with_nccl_env(lab, tmp_path, LAB_VARS, limit=node)
        assert again.ok and again.hosts[node].changed == 0, again.hosts[node]
    finally:
        lab.exec(node, ["rm", "-rf", shim, "/etc/enroot"], check=False)
