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
    host on (SSH_CONNECTION), and with O(rendezvous) whether this host has a route to the
    rendezvous address (a UDP connect, which sends nothing) and from which source address.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  engine:
    description: auto (podman, else docker) or the engine to look for.
    type: str
    default: auto
    choices: [auto, podman, docker]
  local_address:
    description: An address of this host (its ansible_host); the interface holding it is returned.
    type: str
  cdi_spec:
    description:
      - The RDMA CDI spec the container_runtime role writes; when given, RV(cdi) says whether it
        is there, whether the engine reads CDI specs, and what the host's nccl.conf sets.
    type: str
  nccl_conf:
    description: The host's NCCL settings file (nccl_env's), read for RV(nccl_conf).
    type: str
    default: /etc/nccl.conf
  rendezvous_port:
    description:
      - On the rendezvous host, its port; RV(rendezvous_port) then says whether another program
        listens there.
    type: int
  remote_dir:
    description: The role's directory on the host (its own leftover launch is told apart by it).
    type: str
    default: /var/tmp/rdmaprov-validate
  settings:
    description:
      - The nccl_validate role's settings (its variables without the C(nccl_validate_) prefix,
        plus C(hosts), the play's hosts, C(host), this host's inventory name, C(address), its
        ansible_host, and C(label), the run's name; the keys of C(PLAN_KEYS) in
        module_utils/validate_launch.py). With them the module takes O(engine),
        O(local_address), O(cdi_spec), O(rendezvous_port) and O(remote_dir) from the settings
        and returns RV(plan) (validate_launch.plan()).
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py), from the role variable
        C(nccl_validate_<key>) where one is defined, else from the play (C(host), C(address),
        C(hosts), C(check_mode), C(connection), C(managed)). C({}) gives the role's settings whole.
    type: dict
  rendezvous:
    description:
      - "The run's rendezvous, this host's C(plan.rendezvous): {members, master_addr, host,
        refuse}: the run's hosts (the rendezvous host first), nccl_validate_master_addr, this
        host's inventory name and its plan's refusals. RV(rendezvous) then says the address
        every member dials and whether this host can reach it (on the rendezvous host: whether
        it holds it), and RV(failure) the one line that stops this host, if any."
    type: dict
  own:
    description:
      - With O(rendezvous), the rendezvous host's C(plan.own) ([address, where from]), null
        when its preflight did not run.
    type: raw
  result:
    description:
      - "A run on this host: {dir, label, timeout}: its directory, its name and
        nccl_validate_timeout (the launch that nccl_validate_preflight returns has them).
        RV(part) then says how this host's part ended, from the run's C(rc), C(worker.log) and
        C(steps.log) (validate_launch.part_failure()); nothing else is probed. With C(local)
        (and C(rails_local)), the result directories on the controller, RV(part) also lists
        what to fetch there."
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
"""

EXAMPLES = r"""
- name: Probe the host
  rdmaprov.cluster.nccl_validate_probe:
    local_address: "{{ ansible_host }}"
  register: probe
"""

RETURN = r"""
cdi:
  description:
    - "With O(cdi_spec): {spec, exists, engine_cdi, why}: whether the spec is there and whether
      the engine reads it."
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
nccl_conf:
  description:
    - "{path, settings}: the NCCL settings of O(nccl_conf) as NCCL reads them (a job's, through the
      CDI spec's mount); settings is null when the file cannot be read."
  returned: always
  type: dict
routes:
  description: With O(rendezvous), the rendezvous address's {address, source, error}; error is null when there is a route.
  returned: when O(rendezvous) is given
  type: dict
plan:
  description:
    - "With O(settings): {members, own, settings, refuse, rendezvous, keep, port_problem}: the
      run's hosts (the rendezvous host first), this host's [address, where from] for its
      peers, the settings the image preflight and the launch take, the lines that refuse this
      host, what O(rendezvous) takes, the files to keep with the results on the controller
      ([{dir, dest, content}]) and why the rendezvous port is not free ('' when it is)
      (validate_launch.plan())."
    - "Through the action plugin, in the role (nccl_validate_worker_src defined), also
      C(worker): the worker's files to copy to the host, [{name, src, dest}]
      (validate_launch.worker_copies())."
  returned: when O(settings) is given
  type: dict
rendezvous:
  description:
    - "With O(rendezvous): {addr, error}: the address every member dials, and '' or the one line
      saying why this host cannot use it."
  returned: when O(rendezvous) is given
  type: dict
failure:
  description: "With O(rendezvous): '' or the one line that stops this host before the launch."
  returned: when O(rendezvous) is given
  type: str
part:
  description:
    - "With O(result): {rc, reason, fetch}: the part's exit code, '' or why it failed, and
      (with C(local)) [{src, dest}], what to fetch onto the controller."
  returned: when O(result) is given
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


def nccl_conf_of(path):
    """{path, settings}: what the host's nccl.conf sets, as NCCL reads it (what a job's
    container gets through the CDI spec's mount, and a worker on the host reads); settings
    None when the file cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return {"path": path, "settings": cdi_spec.settings_of(fh.read())}
    except OSError:
        return {"path": path, "settings": None}


def cdi_of(spec, engine):
    """Is the RDMA CDI spec there, and does ENGINE read it (docker from 25)."""
    version = (crp.engines().get(engine) or {}).get("version")
    ok, why = cdi_spec.engine_cdi(engine, version)
    return {"spec": spec, "exists": os.path.isfile(spec), "engine_cdi": ok, "why": why}


def engine_found(wanted):
    for name in (("podman", "docker") if wanted == "auto" else (wanted,)):
        if shutil.which(name):
            return name
    return "none"


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def rail_files(run_dir):
    """The regular files of the run's rails/ directory (the rail round's outputs)."""
    rails = os.path.join(run_dir, "rails")
    try:
        names = os.listdir(rails)
    except OSError:
        return []
    return [n for n in names if os.path.isfile(os.path.join(rails, n))
            and not os.path.islink(os.path.join(rails, n))]


def part(result):
    run_dir = result["dir"]
    rc = read_text(os.path.join(run_dir, "rc")).strip()
    reason = validate_launch.part_failure(
        result["label"], rc, read_text(os.path.join(run_dir, "worker.log")),
        read_text(os.path.join(run_dir, validate_launch.STEPS_FILE)), result["timeout"])
    out = {"rc": rc, "reason": reason}
    if "local" in result:
        rails = result.get("rails_local") or ""
        out["fetch"] = validate_launch.fetched(run_dir, result["local"], rails,
                                               rail_files(run_dir) if rails else [])
    return out


def rendezvous(spec, own):
    """The run's rendezvous address and, unless it is this host's loopback, this host's route
    to it; on the rendezvous host the address must be one of its own."""
    members = list(spec["members"])
    rdzv = validate_launch.rendezvous_of(members, spec.get("master_addr") or "", own)
    routes = {}
    if rdzv["addr"] and rdzv["addr"] != "127.0.0.1":
        r = routes[rdzv["addr"]] = route(rdzv["addr"])
        if spec.get("host") == members[0]:
            r["error"] = r["error"] or validate_launch.rendezvous_addr_problem(r, members[0]) or None
        if r["error"] and not rdzv["error"]:
            rdzv["error"] = f"rendezvous address {r['address'] or rdzv['addr']}: {r['error']}"
    return rdzv, routes


def main():
    module = AnsibleModule(
        argument_spec={"engine": {"type": "str", "default": "auto",
                                  "choices": ["auto", "podman", "docker"]},
                       "local_address": {"type": "str"},
                       "cdi_spec": {"type": "str"},
                       "nccl_conf": {"type": "str", "default": "/etc/nccl.conf"},
                       "rendezvous_port": {"type": "int"},
                       "remote_dir": {"type": "str", "default": "/var/tmp/rdmaprov-validate"},
                       "settings": {"type": "dict"},
                       "rendezvous": {"type": "dict"},
                       "own": {"type": "raw"},
                       "result": {"type": "dict"}},
        supports_check_mode=True)
    p = dict(module.params)
    if p["result"] is not None:
        module.exit_json(changed=False, part=part(p["result"]))
    if p["rendezvous"] is not None:
        rdzv, routes = rendezvous(p["rendezvous"], p["own"])
        failure = validate_launch.refusal(rdzv["error"], p["rendezvous"].get("refuse"))
        module.exit_json(changed=False, rendezvous=rdzv, routes=routes, failure=failure)
    s = p["settings"]
    if s is not None:
        missing = [k for k in validate_launch.PLAN_KEYS if k not in s]
        if missing:
            module.fail_json(msg=f"settings lack {', '.join(missing)}")
        container = s["runtime"] == "container"
        p.update(engine=s["engine"], local_address=s["address"], remote_dir=s["remote_dir"],
                 cdi_spec=s["cdi_spec"] if container and s["cdi_device"] else None,
                 # The rendezvous host's port: another program listening there fails the
                 # launch (EADDRINUSE).
                 rendezvous_port=(int(s["master_port"])
                                  if s["host"] == validate_launch.master_of(s) else None))
    addrs = addresses()
    local = p["local_address"]
    _client, ssh_server = ssh_session.endpoints()
    engine = engine_found(p["engine"])
    extra = {}
    if p["cdi_spec"]:
        extra["cdi"] = cdi_of(p["cdi_spec"], engine)
    port = p["rendezvous_port"]
    if port is not None:
        holders = firewall_probe.port_holders(port)
        problem = validate_launch.rendezvous_port_problem(port, holders, p["remote_dir"])
        extra["rendezvous_port"] = {"port": port, "holders": holders, "problem": problem}
    result = dict(
        engine=engine,
        gpu_count=len(glob.glob("/proc/driver/nvidia/gpus/*")),
        ib_devices=sorted(glob.glob("/dev/infiniband/*")),
        hcas=sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir(
            "/sys/class/infiniband") else [],
        rdma=rdma_userspace(),
        addresses=addrs,
        ssh_server_addr=ssh_server,
        local_ifname=next((n for n, a in addrs.items() if local and local in a), None),
        nccl_conf=nccl_conf_of(p["nccl_conf"]),
        **extra,
    )
    if s is not None:
        try:
            result["plan"] = validate_launch.plan(s, result, module.check_mode)
        except (ValueError, KeyError, TypeError) as exc:
            module.fail_json(msg=str(exc), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
