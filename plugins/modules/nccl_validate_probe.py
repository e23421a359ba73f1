#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_validate_probe
short_description: What a host offers the validation launch (engine, GPUs, RDMA, addresses, routes)
description:
  - Reads only; changes nothing (check mode safe). Python standard library only, no C{ip}
    binary (hosts without iproute2 exist, e.g. minimal GPU VMs).
  - Container engine (podman, then docker), NVIDIA GPUs (/proc/driver/nvidia/gpus),
    /dev/infiniband device files, HCAs in /sys/class/infiniband, the host's rdma-core userspace
    (libibverbs.so.1, librdmacm.so.1, the providers directory, /etc/libibverbs.d).
  - Each interface's IPv4 address (socket ioctl), the address the SSH connection reached this
    host on (SSH_CONNECTION), and for each I(targets) address whether this host has a route to
    it (a UDP connect, which sends nothing) and from which source address.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  engine:
    description: auto (podman, else docker) or the engine to look for.
    type: str
    default: auto
    choices: [auto, podman, docker]
  targets:
    description: Addresses to check a route to (IP addresses or names, resolved here).
    type: list
    elements: str
    default: []
  local_address:
    description: An address of this host (its ansible_host); the interface holding it is returned.
    type: str
  cdi_spec:
    description:
      - The RDMA CDI spec the container_runtime role writes; when given, RV(cdi) says whether it
        is there, whether the engine reads CDI specs, and what the host's nccl.conf sets.
    type: str
  nccl_conf:
    description: The host's NCCL settings file (nccl_env's), read for the intended settings in RV(cdi).
    type: str
    default: /etc/nccl.conf
  rendezvous_port:
    description:
      - On the rendezvous host, its port; RV(rendezvous_port) then says whether another program
        listens there.
    type: int
  rendezvous_host:
    description:
      - On the rendezvous host, its inventory name; each of O(targets) must then be one of its
        own addresses (the store listens here), else its RV(routes) entry carries the error.
    type: str
  remote_dir:
    description: The role's directory on the host (its own leftover launch is told apart by it).
    type: str
    default: /var/tmp/rdmaprov-validate
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Probe the host
  rdmaprov.cluster.nccl_validate_probe:
    targets: [10.0.0.1]
  register: probe
"""

RETURN = r"""
cdi:
  description:
    - "With O(cdi_spec): {spec, exists, engine_cdi, why, intended}: whether the spec is there,
      whether the engine reads it, and the NCCL settings of O(nccl_conf)."
  returned: when O(cdi_spec) is given
  type: dict
engine:
  description: The container engine found, or none.
  returned: always
  type: str
gpu_count:
  description: NVIDIA GPUs the driver shows.
  returned: always
  type: int
ib_devices:
  description: Paths of the /dev/infiniband device files.
  returned: always
  type: list
hcas:
  description: Entries of /sys/class/infiniband.
  returned: always
  type: list
rdma:
  description: The host's rdma-core userspace (libs name to path, providers dir, config dir).
  returned: always
  type: dict
addresses:
  description: Interface name to its IPv4 addresses.
  returned: always
  type: dict
ssh_server_addr:
  description: The address the SSH connection reached this host on, or null (local connection).
  returned: always
  type: str
local_ifname:
  description: The interface holding local_address, or null.
  returned: always
  type: str
routes:
  description: Per target, {address, source, error}; error is null when there is a route.
  returned: always
  type: dict
rendezvous_port:
  description:
    - "With O(rendezvous_port): {port, holders, problem}: the processes listening on it
      ([{pid, name, cmdline}]) and, when one is not an earlier launch of ours, why the launch
      cannot listen there ('' when it can)."
  returned: when O(rendezvous_port) is given
  type: dict
"""

import fcntl
import glob
import os
import shutil
import socket
import struct
import sysconfig

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdmaprov.cluster.plugins.module_utils import cdi_spec
from ansible_collections.rdmaprov.cluster.plugins.module_utils import container_runtime_probe as crp
from ansible_collections.rdmaprov.cluster.plugins.module_utils import firewall_probe
from ansible_collections.rdmaprov.cluster.plugins.module_utils import ssh_session
from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch

SIOCGIFADDR = 0x8915


def ipv4_of(ifname):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", ifname.encode()[:15]))
        return socket.inet_ntoa(packed[20:24])
    except OSError:
        return None
    finally:
        s.close()


def addresses():
    out = {}
    for _index, name in socket.if_nameindex():
        addr = ipv4_of(name)
        out[name] = [addr] if addr else []
    return out


def route(target):
    """The source address this host would use towards target, or the error."""
    try:
        infos = socket.getaddrinfo(target, 9, socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as exc:
        return {"address": None, "source": None, "error": f"cannot resolve {target}: {exc}"}
    addr = infos[0][4][0]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((addr, 9))  # UDP: picks the route and source address, sends nothing
        return {"address": addr, "source": s.getsockname()[0], "error": None}
    except OSError as exc:
        return {"address": addr, "source": None, "error": f"no route to {addr}: {exc.strerror}"}
    finally:
        s.close()


def lib_dirs():
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else []
    return dirs + ["/usr/lib64", "/lib64", "/usr/lib", "/lib"]


# rdma-core's verbs and CM, the providers' own libraries (libmlx5-rdmav*.so links libmlx5.so.1)
# and libnl, which libibverbs needs: what an image without rdma-core lacks.
RDMA_LIBS = ("libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1", "libmlx4.so.1", "libefa.so.1",
             "libhns.so.1", "libmana.so.1", "libnl-3.so.200", "libnl-route-3.so.200")


def rdma_userspace():
    """Paths as the loader names them (a bind mount follows the link to the file); mounted at
    the same path in the image, which suits images of the host's multiarch layout."""
    libs = {}
    for name in RDMA_LIBS:
        libs[name] = next((os.path.join(d, name) for d in lib_dirs()
                           if os.path.exists(os.path.join(d, name))), None)
    providers = None
    if libs["libibverbs.so.1"]:
        cand = os.path.join(os.path.dirname(libs["libibverbs.so.1"]), "libibverbs")
        providers = cand if os.path.isdir(cand) else None
    config = "/etc/libibverbs.d" if os.path.isdir("/etc/libibverbs.d") else None
    return {"libs": {k: v for k, v in libs.items() if v or k == "libibverbs.so.1"},
            "providers": providers, "config": config}


def cdi_of(spec, engine, nccl_conf):
    """Is the RDMA CDI spec there, does ENGINE read it (docker from 25), and what the host's
    nccl.conf sets (what the container will get through the spec's mount)."""
    version = (crp.engines().get(engine) or {}).get("version")
    ok, why = cdi_spec.engine_cdi(engine, version)
    try:
        with open(nccl_conf, encoding="utf-8", errors="replace") as fh:
            intended = cdi_spec.settings_of(fh.read())
    except OSError:
        intended = {}
    return {"spec": spec, "exists": os.path.isfile(spec), "engine_cdi": ok, "why": why,
            "intended": intended}


def engine_found(wanted):
    for name in (("podman", "docker") if wanted == "auto" else (wanted,)):
        if shutil.which(name):
            return name
    return "none"


def main():
    module = AnsibleModule(
        argument_spec={"engine": {"type": "str", "default": "auto",
                                  "choices": ["auto", "podman", "docker"]},
                       "targets": {"type": "list", "elements": "str", "default": []},
                       "local_address": {"type": "str"},
                       "cdi_spec": {"type": "str"},
                       "nccl_conf": {"type": "str", "default": "/etc/nccl.conf"},
                       "rendezvous_port": {"type": "int"},
                       "rendezvous_host": {"type": "str"},
                       "remote_dir": {"type": "str", "default": "/var/tmp/rdmaprov-validate"}},
        supports_check_mode=True)
    addrs = addresses()
    local = module.params["local_address"]
    _client, ssh_server = ssh_session.endpoints()
    engine = engine_found(module.params["engine"])
    extra = {}
    if module.params["cdi_spec"]:
        extra["cdi"] = cdi_of(module.params["cdi_spec"], engine, module.params["nccl_conf"])
    port = module.params["rendezvous_port"]
    if port is not None:
        holders = firewall_probe.port_holders(port)
        problem = validate_launch.rendezvous_port_problem(port, holders,
                                                          module.params["remote_dir"])
        extra["rendezvous_port"] = {"port": port, "holders": holders, "problem": problem}
    routes = {t: route(t) for t in module.params["targets"]}
    if module.params["rendezvous_host"]:
        for r in routes.values():
            r["error"] = r["error"] or validate_launch.rendezvous_addr_problem(
                r, module.params["rendezvous_host"]) or None
    module.exit_json(
        changed=False,
        engine=engine,
        gpu_count=len(glob.glob("/proc/driver/nvidia/gpus/*")),
        ib_devices=sorted(glob.glob("/dev/infiniband/*")),
        hcas=sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir(
            "/sys/class/infiniband") else [],
        rdma=rdma_userspace(),
        addresses=addrs,
        ssh_server_addr=ssh_server,
        local_ifname=next((n for n, a in addrs.items() if local and local in a), None),
        routes=routes,
        **extra,
    )


if __name__ == "__main__":
    main()
