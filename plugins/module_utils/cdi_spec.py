# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The RDMA CDI spec, in one tested place: a host's HCAs and their verbs device nodes (read from
sysfs), and the CDI spec that gives a container exactly those, the host's NCCL settings file
read-only at /etc/nccl.conf and the environment that goes with it.

``read_facts`` reads a host (a sysfs root and a /dev root, so tests run on captured trees);
``plan`` turns facts + settings into the spec, its text, the drift against the file on the host
and the report lines; ``to_yaml`` writes the spec deterministically (JSON-quoted scalars, valid
YAML that the CDI loaders of podman and docker read). Standard library only: it runs in the
probe module on the node and in `rdmaprov probe`.

CDI format: github.com/cncf-tags/container-device-interface SPEC.md. The spec uses only
v0.3.0 fields (deviceNodes by ``path``, mounts without ``type``, env, device names that start
with a letter), so cdiVersion 0.3.0: the oldest version every CDI-aware engine loads (podman
>= 4.1, docker >= 25).
"""
from __future__ import annotations

import json
import os
import re

from ansible_collections.rdmaprov.cluster.plugins.module_utils import rdma_ports

_read = rdma_ports.read  # a sysfs/configfs attribute, stripped; None when unreadable

KIND = "rdmaprov.io/rdma"
CDI_VERSION = "0.3.0"
SPEC_PATH = "/etc/cdi/rdmaprov-rdma.yaml"
CONTAINER_CONF = "/etc/nccl.conf"
DOCKER_CDI_MIN = 25
HEADER = ("# Written by rdmaprov (container_runtime role) from this host's HCAs and regenerated\n"
          "# when they change; local edits are overwritten. Use: --device {kind}=all\n")
NO_HCA = "no RDMA device: the spec carries only the NCCL settings"
# A CDI device name: alphanumeric at both ends, [-_.] between (SPEC.md, "CDI Devices").
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]$|^[A-Za-z]$")


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _by_hca(entries, base, hca):
    """The entries under ``base`` (uverbsN, umadN, issmN) that belong to ``hca``: their
    ``ibdev`` file names it (a PCI function can carry another HCA's, as a RoCE LAG does)."""
    out = []
    for name in entries:
        ibdev = _read(os.path.join(base, name, "ibdev"))
        if ibdev is None or ibdev == hca:
            out.append(name)
    return out


def _natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def read_facts(sysfs_root="/sys", dev_root="/dev", conf_path=CONTAINER_CONF):
    """What the spec is made of, read-only: per HCA (``/sys/class/infiniband/<hca>``) its verbs
    devices (``device/infiniband_verbs/uverbsN``, where ib_uverbs puts them beside the HCA on
    its PCI function; else ``/sys/class/infiniband_verbs/*/ibdev``) and its MAD devices
    (``device/infiniband_mad/{umad,issm}N``); which /dev/infiniband nodes exist; and the NCCL
    settings file on the host."""
    cls = os.path.join(sysfs_root, "class")
    hcas = []
    for hca in sorted(_listdir(os.path.join(cls, "infiniband")), key=_natural):
        dev = os.path.join(cls, "infiniband", hca, "device")
        vbase = os.path.join(dev, "infiniband_verbs")
        if os.path.isdir(vbase):
            uverbs = _by_hca([n for n in _listdir(vbase) if n.startswith("uverbs")], vbase, hca)
        else:
            vbase = os.path.join(cls, "infiniband_verbs")
            uverbs = [n for n in _listdir(vbase) if n.startswith("uverbs")
                      and _read(os.path.join(vbase, n, "ibdev")) == hca]
        mbase = os.path.join(dev, "infiniband_mad")
        if not os.path.isdir(mbase):
            mbase = os.path.join(cls, "infiniband_mad")
        mad = [n for n in _listdir(mbase) if n.startswith(("umad", "issm"))
               and _read(os.path.join(mbase, n, "ibdev")) == hca]
        hcas.append({"name": hca, "uverbs": sorted(uverbs, key=_natural),
                     "umad": sorted((n for n in mad if n.startswith("umad")), key=_natural),
                     "issm": sorted((n for n in mad if n.startswith("issm")), key=_natural)})
    nodes = sorted(_listdir(os.path.join(dev_root, "infiniband")), key=_natural)
    conf = None
    if conf_path:
        text = _read(conf_path)
        conf = {"path": conf_path, "exists": text is not None,
                "settings": settings_of(text or "")}
    return {"hcas": hcas, "dev_nodes": nodes, "nccl_conf": conf}


def settings_of(text):
    """NAME=value lines of an nccl.conf, as NCCL reads them (a leading '#' is a comment; the
    first '=' splits)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        out[name] = value
    return out


def docker_major(version):
    """The major number of a docker server version ('26.1.5+dfsg1' -> 26), or None."""
    m = re.match(r"\s*(\d+)\.", str(version or ""))
    return int(m.group(1)) if m else None


def engine_cdi(engine, version):
    """(supports CDI, why not): podman reads /etc/cdi itself; docker from 25 with CDI enabled
    in daemon.json (the role enables it); older docker cannot."""
    if engine == "podman":
        return True, ""
    if engine == "docker":
        major = docker_major(version)
        if major is None:
            return False, "docker's server version is unknown (is the daemon running?)"
        if major < DOCKER_CDI_MIN:
            return False, (f"docker {version} has no CDI (docker >= {DOCKER_CDI_MIN} has): "
                           "pass the devices with --device /dev/infiniband/... instead")
        return True, ""
    return False, f"no container engine ({engine})"


def _edits(nodes, mount, env):
    edits = {}
    if env:
        edits["env"] = env
    if nodes:
        edits["deviceNodes"] = [{"path": f"/dev/infiniband/{n}"} for n in nodes]
    if mount:
        edits["mounts"] = [mount]
    return edits


def plan(facts, settings):
    """facts (read_facts) + settings -> {'spec', 'content', 'devices', 'problems', 'report',
    'drift'}.

    settings: ``mad`` (umad/issm too), ``conf_path`` (the host's NCCL file; '' for none),
    ``env`` (extra NAME: value for every device), ``current`` (the text of the spec on the host,
    or None when absent) and ``path``. A device node sysfs names but /dev lacks is left out and
    named in ``problems``: the engine would refuse to start any container asking for it.
    """
    mad = bool(settings.get("mad"))
    present = set(facts.get("dev_nodes") or [])
    problems, per_hca = [], []
    for hca in facts.get("hcas") or []:
        name = hca["name"]
        if not _NAME.match(name):
            problems.append(f"{name}: not a CDI device name; left out")
            continue
        want = list(hca.get("uverbs") or []) + ((hca.get("umad") or []) + (hca.get("issm") or [])
                                                if mad else [])
        missing = [n for n in want if n not in present]
        if not hca.get("uverbs"):
            problems.append(f"{name}: no verbs device (is ib_uverbs loaded?)")
        if missing:
            problems.append(f"{name}: /dev/infiniband/{', '.join(missing)} missing")
        nodes = [n for n in want if n in present]
        if nodes:
            per_hca.append((name, nodes))
    common = ["rdma_cm"] if "rdma_cm" in present and per_hca else []
    conf_path = settings.get("conf_path") or ""
    mount = ({"hostPath": conf_path, "containerPath": CONTAINER_CONF,
              "options": ["ro", "nosuid", "nodev", "bind"]} if conf_path else None)
    env = ([f"NCCL_CONF_FILE={CONTAINER_CONF}"] if conf_path else [])
    env += [f"{k}={v}" for k, v in sorted((settings.get("env") or {}).items())]
    all_nodes = [n for _hca, nodes in per_hca for n in nodes] + common
    devices = [{"name": "all", "containerEdits": _edits(all_nodes, mount, env)}]
    devices += [{"name": name, "containerEdits": _edits(nodes + common, mount, env)}
                for name, nodes in per_hca]
    spec = {"cdiVersion": CDI_VERSION, "kind": settings.get("kind") or KIND, "devices": devices}
    report = []
    if not devices[0]["containerEdits"]:
        # CDI refuses a device without edits: no spec at all, and say why.
        spec, content = None, None
        report.append("no RDMA device and no NCCL settings file: no CDI spec")
    else:
        content = HEADER.format(kind=spec["kind"]) + to_yaml(spec)
        if not per_hca:
            report.append(NO_HCA)
        else:
            report.append(f"{spec['kind']}: all, " + ", ".join(n for n, _nodes in per_hca)
                          + f" ({len(all_nodes)} device nodes)")
    conf = facts.get("nccl_conf") or {}
    if conf_path and conf and not conf.get("exists"):
        report.append(f"{conf_path} is not there yet: a container asking for the device will "
                      "not start until nccl_env writes it")
    current = settings.get("current")
    path = settings.get("path") or SPEC_PATH
    if content is None:
        drift = [f"{path}: present, wanted absent"] if current is not None else []
    elif current is None:
        drift = [f"{path}: absent"]
    elif current != content:
        drift = [f"{path}: content differs"]
    else:
        drift = []
    return {"spec": spec, "content": content, "devices": [d["name"] for d in devices]
            if spec else [], "problems": problems, "report": report + problems, "drift": drift}


def _scalar(value):
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def to_yaml(value, indent=0):
    """Block-style YAML of dicts, lists and scalars, keys in the order given; every string is
    JSON-quoted, which YAML reads as the same string."""
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:")
                lines.append(to_yaml(item, indent + 2).rstrip("\n"))
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and item:
                body = to_yaml(item, indent + 2).splitlines()
                lines.append(f"{pad}- {body[0].lstrip()}")
                lines.extend(body[1:])
            elif isinstance(item, list) and item:
                lines.append(f"{pad}-")
                lines.append(to_yaml(item, indent + 2).rstrip("\n"))
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    else:
        lines.append(pad + _scalar(value))
    return "\n".join(lines) + "\n"


def run_flags(engine, version, planned, installed, gpus=0):
    """What a training container needs here, as `ENGINE run` flags (before the image), and why
    the CDI device is not among them ('' when it is). The host's network and IPC, the GPUs, and
    the RDMA CDI device where the engine reads the spec and it is installed; elsewhere the same
    edits as the spec's `all` device by hand (device nodes, the NCCL file read-only, its
    variable, memlock). Never --privileged. ``planned``: plan()'s result."""
    ok, why = engine_cdi(engine, version)
    flags = ["--network", "host", "--ipc", "host"]
    if gpus:
        flags += ["--gpus", "all"] if engine == "docker" else ["--device", "nvidia.com/gpu=all"]
    spec = (planned or {}).get("spec")
    if ok and installed and spec:
        return flags + ["--device", f"{spec['kind']}=all"], ""
    if not spec:
        return flags, why or "no CDI spec planned here"
    edits = spec["devices"][0]["containerEdits"]
    for node in edits.get("deviceNodes", []):
        flags += ["--device", node["path"]]
    for mount in edits.get("mounts", []):
        flags += ["-v", f"{mount['hostPath']}:{mount['containerPath']}:ro"]
    for env in edits.get("env", []):
        flags += ["-e", env]
    flags += ["--ulimit", "memlock=-1:-1"]
    return flags, why or f"the spec is not installed ({SPEC_PATH}): run bootstrap"


ENROOT_MOUNTS = "mounts.d/90-rdmaprov-rdma.fstab"
ENROOT_ENVIRON = "environ.d/90-rdmaprov-rdma.env"


def enroot_files(conf_path, env=None):
    """enroot's (Pyxis') configuration for the same settings, relative path -> text, or {}
    without an NCCL file. enroot bind-mounts the host's /dev into every container already
    (its conf/mounts/10-system.fstab), so the verbs nodes are there; what it lacks is the
    host's nccl.conf (an fstab line, enroot's `x-create=file` so the target is created) and
    the variable (an environ.d line, NAME=value)."""
    if not conf_path:
        return {}
    head = "# Written by rdmaprov (container_runtime role); local edits are overwritten.\n"
    mounts = (head + f"{conf_path} {CONTAINER_CONF} none "
              "x-create=file,bind,ro,nosuid,nodev,noexec,private\n")
    lines = [f"NCCL_CONF_FILE={CONTAINER_CONF}"]
    lines += [f"{k}={v}" for k, v in sorted((env or {}).items())]
    return {ENROOT_MOUNTS: mounts, ENROOT_ENVIRON: head + "\n".join(lines) + "\n"}
