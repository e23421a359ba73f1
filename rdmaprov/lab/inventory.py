"""The files `rdmaprov lab up` writes for its user: an Ansible inventory of the nodes, their
host keys, and group_vars with the settings a user would write for such a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from rdmaprov.lab import base as lab_base

if TYPE_CHECKING:
    from rdmaprov.lab import LabState

LAB_WORKER_IMAGE = "localhost/rdmaprov-lab-worker:latest"
# In the lab's directory: the SSH key, the inventory and the known_hosts file.
KEY_FILES = ("id_ed25519", "inventory.ini", "known_hosts")


def write_inventory(state: LabState, lab_dir: Path, nodes_dir: Path) -> None:
    """The inventory, its known_hosts (each node's own host key) and group_vars/lab.yml."""
    key, inventory, known_hosts = (lab_dir / name for name in KEY_FILES)
    known = []
    for n in state.nodes:
        pub = nodes_dir / n["name"] / "upper/etc/ssh/ssh_host_ed25519_key.pub"
        keytype, hostkey = pub.read_text().split()[:2]
        known.append(f"{n['address']} {keytype} {hostkey}")
    known_hosts.write_text("\n".join(known) + "\n")
    lines = ["# Written by 'rdmaprov lab up'; host keys are recorded in known_hosts.", "[lab]"]
    lines += [f"{n['name']} ansible_host={n['address']}" for n in state.nodes]
    lines += [
        "", "[lab:vars]", "ansible_user=root",
        f"ansible_ssh_private_key_file={key}",
        f"ansible_ssh_common_args='-o UserKnownHostsFile={known_hosts} "
        "-o StrictHostKeyChecking=yes'",
        "ansible_python_interpreter=/usr/bin/python3",
    ]
    inventory.write_text("\n".join(lines) + "\n")
    write_group_vars(state, lab_dir)


# docker's default capabilities (moby's oci/caps defaults) less MKNOD.
DOCKER_CAPS_BUT_MKNOD = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "NET_RAW", "SETGID", "SETUID",
                         "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL",
                         "AUDIT_WRITE")


def verify_args(suite: str) -> list[str]:
    """The check container's capabilities on a lab node, for docker and podman alike: docker
    20.10 (Debian 12) takes `--cap-drop MKNOD`; docker 26 (Debian 13) refuses to drop a
    capability it cannot give ("not available in the current environment"), so there its
    defaults less MKNOD."""
    if suite == "bookworm":
        return ["--cap-drop", "MKNOD"]
    return ["--cap-drop", "ALL"] + [arg for cap in DOCKER_CAPS_BUT_MKNOD
                                    for arg in ("--cap-add", cap)]


def write_group_vars(state: LabState, lab_dir: Path) -> None:
    """What a user would write for this cluster: the data-path roles act on the fabric
    network (eth1), never on eth0, which carries SSH."""
    gv = lab_dir / "group_vars"
    gv.mkdir(exist_ok=True)
    path = gv / "lab.yml"
    if not state.fabric_bridge:
        path.unlink(missing_ok=True)
        return
    doc = {
        "net_mtu_interfaces": [{"name": "eth1", "mtu": state.fabric_mtu}],
        "net_mtu_verify_interface": "eth1",
        "firewall_cluster_subnets": [state.fabric_subnet, state.subnet],
        "roce_qos_interfaces": ["eth1"],
        # NCCL's socket traffic on the fabric: /etc/nccl.conf says so, and a job's container
        # gets it through the RDMA CDI device; validate's worker gets the same file.
        "nccl_env_socket_ifname": "eth1",
        # This machine lacks CAP_SYS_RESOURCE, so nodes cannot raise the memlock hard limit:
        # accept the host's limit here (a real cluster keeps the default, unlimited).
        "container_runtime_memlock": "host",
        # No registry is reachable from the lab: its worker image is a root filesystem
        # tarball that `lab up` makes from the nodes' own base (python3, no torch; torch is
        # mounted in from /opt/rdmaprov-torch).
        "container_runtime_images": [{"name": LAB_WORKER_IMAGE,
                                      "archive": lab_base.WORKER_IMAGE_TAR,
                                      "format": "rootfs"}],
        "container_runtime_verify_image": LAB_WORKER_IMAGE,
        # A lab node cannot give a container CAP_MKNOD, one of docker's default capabilities
        # (podman's defaults lack it): the check container goes without it.
        "container_runtime_verify_args": verify_args(state.suite),
        # Validation: gloo on the CPUs (no GPUs here) over the fabric, in the lab's image
        # with torch mounted in from the host's cache. Its NCCL settings are nccl.conf's, as a
        # job's: gloo's interface is not one of them.
        "nccl_validate_backend": "gloo",
        "nccl_validate_image": LAB_WORKER_IMAGE,
        "nccl_validate_pythonpath": [lab_base.TORCH_NODE_DIR],
        "nccl_validate_memlock": "host",
        "nccl_validate_env": {"GLOO_SOCKET_IFNAME": "eth1"},
        "nccl_validate_worker_args": ["--max-bytes", "16M"],
    }
    if state.netstack == "none":
        # These nodes have no network manager: their addresses are set from outside, as in
        # a container, so the MTU persists through rdmaprov's boot-time unit. With a
        # --netstack the role finds the stack that owns eth1 itself (net_mtu_persist: auto).
        doc["net_mtu_persist"] = "systemd_unit"
    header = ("# Written by 'rdmaprov lab up': the lab's settings, as a user would write them\n"
              f"# for a cluster with management network {state.subnet} (eth0) and fabric\n"
              f"# {state.fabric_subnet} (eth1).\n")
    path.write_text(header + "---\n" + yaml.safe_dump(doc, sort_keys=False))
