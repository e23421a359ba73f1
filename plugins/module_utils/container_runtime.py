# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The container_runtime role's rules (issue 28: one plan() per role): the probe's facts (module
container_runtime_probe) + the role's settings -> what the role does on one host. Pure: the
module reads the host, this decides, the role's YAML acts on the answer.
"""
from __future__ import annotations

import json
import posixpath

from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift

ENGINES = ("podman", "docker")
# OS family -> engine -> packages (Debian's where the family has none of its own); the role's
# container_runtime_*_packages win when set.
OS_PACKAGES = {
    "Debian": {"podman": ["podman", "runc"], "docker": ["docker.io"]},
    "RedHat": {"podman": ["podman", "runc"],
               "docker": ["docker-ce", "docker-ce-cli", "containerd.io"]},
}
FUSE_MOUNT_PROGRAM = "/usr/bin/fuse-overlayfs"
OWN_CHOICE = "podman's own choice"
NVIDIA_KEYRING = "/usr/share/keyrings/nvidia-container-toolkit.asc"
NVIDIA_DEB_URL = "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
NVIDIA_RPM_URL = "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch"
# Loads one image file: rootfs `import` names the image; a docker/OCI archive is `load`ed under
# the name it carries (or none), then tagged with the name asked for, so the next run finds it.
LOAD_SCRIPT = """\
engine=$1 file=$2 name=$3 format=$4
if [ "$format" = auto ]; then
  if tar -tf "$file" | grep -qxE '(\\./)?(manifest\\.json|index\\.json|oci-layout)'; then
    format=archive
  else
    format=rootfs
  fi
fi
if [ "$format" = rootfs ]; then exec "$engine" import "$file" "$name"; fi
out=$("$engine" load -i "$file")
echo "$out"
id=$(printf '%s\\n' "$out" | sed -n 's/^Loaded image[^:]*: *//p' | tail -n 1 | cut -d, -f1)
[ -n "$id" ] || { echo "$file: $engine load named no image" >&2; exit 1; }
"$engine" tag "$id" "$name"
"""

# What the check container prints (sh builtins only: the check image needs only sh, ls and tr).
CHECK_SCRIPT = (
    'echo "memlock=$(ulimit -l)"; echo "ib=$(ls /dev/infiniband 2>/dev/null | tr "\\n" " ")";'
    ' echo "conf=${NCCL_CONF_FILE:-}"; [ -r /etc/nccl.conf ] && while IFS= read -r l'
    ' || [ -n "$l" ]; do case "$l" in NCCL_*) echo "nccl=$l";; esac; done < /etc/nccl.conf;'
    ' true')
# Debian 13 split docker's client out of docker.io: "have" where `docker` is there after the
# install, "package" where apt's index has a docker-cli record (then it is installed), else "none".
DOCKER_CLI_SCRIPT = (
    "command -v docker >/dev/null && echo have || { apt-cache show --no-all-versions docker-cli"
    " 2>/dev/null | grep -q '^Package:' && echo package || echo none; }")
NVIDIA_APT_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
# Where nvidia-ctk writes the CDI spec it generates; installed where it differs.
NVIDIA_CDI_TMP = "/run/rdmaprov-nvidia-cdi.yaml"
NO_GPU = "NVIDIA toolkit: not applicable on this host: no NVIDIA GPU (no /proc/driver/nvidia/gpus)"
# A host with GPUs whose toolkit the inventory turned off: the setting is the reason, not the host.
GPU_OFF = ("NVIDIA toolkit: not set up: container_runtime_nvidia is false on a host with {gpus}"
           " NVIDIA GPU(s); containers get no GPU through NVIDIA's runtime or CDI spec")
NO_IB = "/dev/infiniband in containers: not applicable on this host: no /dev/infiniband"
NO_REGISTRY = (" (no registry here? load the image from a file with container_runtime_images, or"
               " set container_runtime_verify_image to '' to run no check container)")

# The settings plan() reads: the role's container_runtime_* variables without the prefix, and
# host (the inventory name), os_family and check_mode. The module's argument spec is built from
# this table, so that the two cannot drift apart.
SETTINGS: dict[str, dict] = {
    "host": {"type": "str", "default": "",
             "description": "The host's inventory name, which the refusals name."},
    "os_family": {"type": "str", "default": "Debian",
                  "description": ("The OS family (Ansible's fact), which picks the engine's"
                                  " packages.")},
    "check_mode": {"type": "bool", "default": False,
                   "description": ("Whether the play runs under --check (no podman info, no check"
                                   " container).")},
    "architecture": {"type": "str", "default": "x86_64",
                     "description": ("The CPU architecture (Ansible's fact), for NVIDIA's apt"
                                     " source.")},
    "engine": {"type": "str", "default": "auto", "description": "container_runtime_engine."},
    "install": {"type": "bool", "default": True, "description": "container_runtime_install."},
    "podman_packages": {"type": "list", "elements": "str", "default": [],
                        "description": "container_runtime_podman_packages."},
    "docker_packages": {"type": "list", "elements": "str", "default": [],
                        "description": "container_runtime_docker_packages."},
    "docker_daemon_json": {"type": "str", "default": "/etc/docker/daemon.json",
                           "description": ("container_runtime_docker_daemon_json (read here when"
                                           " the engine is docker).")},
    "docker_daemon_options": {"type": "dict", "default": {},
                              "description": "container_runtime_docker_daemon_options."},
    "podman_conf": {"type": "str", "default": "/etc/containers/containers.conf.d/90-rdmaprov.conf",
                    "description": "container_runtime_podman_conf."},
    # No default: null is a value here (leave the limit alone), which a default would replace.
    "pids_limit": {"type": "raw", "default": None,
                   "description": ("container_runtime_pids_limit (auto, an integer, or null to"
                                   " leave it alone).")},
    "podman_storage_driver": {"type": "str", "default": "auto",
                              "description": "container_runtime_podman_storage_driver."},
    "memlock": {"type": "str", "default": "unlimited", "description": "container_runtime_memlock."},
    "limits_file": {"type": "str", "default": "/etc/security/limits.d/90-rdmaprov-memlock.conf",
                    "description": "container_runtime_limits_file."},
    "systemd_dropin": {"type": "str",
                       "default": "/etc/systemd/system.conf.d/90-rdmaprov-memlock.conf",
                       "description": "container_runtime_systemd_dropin."},
    "nvidia": {"type": "raw", "default": "auto",
               "description": "container_runtime_nvidia (auto, true, false)."},
    "nvidia_mode": {"type": "str", "default": "both",
                    "description": "container_runtime_nvidia_mode."},
    "nvidia_repo": {"type": "str", "default": "nvidia",
                    "description": "container_runtime_nvidia_repo (nvidia, local, none)."},
    "nvidia_repo_url": {"type": "str",
                        "default": NVIDIA_DEB_URL,
                        "description": "container_runtime_nvidia_repo_url."},
    "nvidia_local_repo": {"type": "str", "default": "",
                          "description": "container_runtime_nvidia_local_repo."},
    "nvidia_default_runtime": {"type": "bool", "default": False,
                               "description": "container_runtime_nvidia_default_runtime."},
    "rdma_cdi": {"type": "bool", "default": True, "description": "container_runtime_rdma_cdi."},
    "rdma_cdi_spec": {"type": "str", "default": "/etc/cdi/rdmaprov-rdma.yaml",
                      "description": "container_runtime_rdma_cdi_spec."},
    "rdma_cdi_kind": {"type": "str", "default": "rdmaprov.io/rdma",
                      "description": "container_runtime_rdma_cdi_kind."},
    "rdma_cdi_mad": {"type": "bool", "default": False,
                     "description": "container_runtime_rdma_cdi_mad."},
    "rdma_cdi_nccl_conf": {"type": "str", "default": "/etc/nccl.conf",
                           "description": "container_runtime_rdma_cdi_nccl_conf."},
    "rdma_cdi_env": {"type": "dict", "default": {},
                     "description": "container_runtime_rdma_cdi_env."},
    "enroot_conf_dir": {"type": "str", "default": "/etc/enroot",
                        "description": "container_runtime_enroot_conf_dir."},
    "images": {"type": "list", "elements": "dict", "default": [],
               "description": "container_runtime_images ({name, src, archive, format})."},
    "verify_image": {"type": "str", "default": "docker.io/library/busybox:1.36",
                     "description": "container_runtime_verify_image."},
    "verify_timeout": {"type": "int", "default": 120,
                       "description": "container_runtime_verify_timeout."},
    "verify_args": {"type": "list", "elements": "str", "default": [],
                    "description": "container_runtime_verify_args."},
    "managed": {"type": "str", "default": "Ansible managed",
                "description": ("The first comment line of rdmaprov's drop-ins (Ansible's"
                                " DEFAULT_MANAGED_STR, as ansible_managed).")},
    "python_apt": {"type": "bool", "default": True,
                   "description": ("Whether python3-apt is there (the preflight role's fact):"
                                   " without it the apt module installs it, which --check must"
                                   " not.")},
    "apt_cache_valid_time": {"type": "int", "default": 3600,
                             "description": "container_runtime_apt_cache_valid_time."},
    "podman_storage_conf": {"type": "str", "default": "/etc/containers/storage.conf",
                            "description": ("container_runtime_podman_storage_conf (the probe"
                                            " reads it).")},
    "verify": {"type": "bool", "default": True, "description": "container_runtime_verify."},
    # A URL, not a secret (no_log False tells ansible-test so).
    "nvidia_repo_key_url": {"type": "str", "no_log": False,
                            "default": "https://nvidia.github.io/libnvidia-container/gpgkey",
                            "description": "container_runtime_nvidia_repo_key_url."},
    "nvidia_packages": {"type": "list", "elements": "str", "default": ["nvidia-container-toolkit"],
                        "description": "container_runtime_nvidia_packages."},
    "cdi_spec": {"type": "str", "default": "/etc/cdi/nvidia.yaml",
                 "description": "container_runtime_cdi_spec (NVIDIA's CDI spec)."},
}


def argument_spec() -> dict:
    """SETTINGS as an AnsibleModule argument spec (no descriptions)."""
    return {name: {k: v for k, v in spec.items()
                   if k != "description" and not (k == "default" and v is None)}
            for name, spec in SETTINGS.items()}


def rdma_cdi_settings(settings: dict) -> dict:
    """What cdi_spec.plan and the probe take, from the role's settings; {} plans no spec."""
    if not settings.get("rdma_cdi"):
        return {}
    return {"path": settings.get("rdma_cdi_spec"), "kind": settings.get("rdma_cdi_kind"),
            "mad": settings.get("rdma_cdi_mad"), "conf_path": settings.get("rdma_cdi_nccl_conf"),
            "env": settings.get("rdma_cdi_env") or {},
            "enroot_dir": settings.get("enroot_conf_dir")}


def enroot_paths(settings: dict) -> list[str]:
    base = settings.get("enroot_conf_dir") or "/etc/enroot"
    return [base + "/mounts.d/90-rdmaprov-rdma.fstab", base + "/environ.d/90-rdmaprov-rdma.env"]


def probed_paths(settings: dict) -> list[str]:
    """The files the probe reads for the drift: rdmaprov's drop-ins, the spec, enroot's."""
    paths = [settings.get("limits_file"), settings.get("systemd_dropin"),
             settings.get("podman_conf")]
    if settings.get("rdma_cdi"):
        paths += [settings.get("rdma_cdi_spec")] + enroot_paths(settings)
    return [p for p in paths if p]


def pick_engine(wanted: str, engines: dict) -> str:
    """auto: docker where a usable docker is installed, else podman."""
    if wanted != "auto":
        return wanted
    docker = engines.get("docker") or {}
    return "docker" if docker.get("usable") else "podman"


def wants_gpu(nvidia, gpus: int) -> bool:
    value = str(nvidia).lower()
    return value == "true" or (value == "auto" and gpus > 0)


def pids_limit(setting, pids_controller: bool):
    """The pids_limit containers.conf gets, None for none: auto writes 0 where the cgroup has no
    pids controller (any limit stops every container there) and leaves the engine's elsewhere."""
    value = (None if pids_controller else 0) if setting == "auto" else setting
    return None if value is None or str(value) == "" else value


def memlock_why(memlock: dict) -> str:
    return (f"memlock cannot be made unlimited here: hard limit {memlock.get('hard_kib')} KiB, "
            + ("no CAP_SYS_RESOURCE" if not memlock.get("cap_sys_resource")
               else "the kernel refused to raise it"))


def engine_packages(facts: dict, settings: dict) -> list[str]:
    """The engine's packages as plan() picks them (the probe asks apt about the first)."""
    engine = pick_engine(settings.get("engine") or "auto", facts.get("engines") or {})
    return packages(settings, engine,
                    storage_plan(settings, engine, facts.get("storage") or {}, "")["driver"])


def packages(settings: dict, engine: str, storage_driver: str) -> list[str]:
    """The engine's packages here (the role's lists win), fuse-overlayfs where podman needs it."""
    table = OS_PACKAGES.get(settings.get("os_family") or "Debian") or OS_PACKAGES["Debian"]
    if engine == "docker":
        return list(settings.get("docker_packages") or table["docker"])
    return (list(settings.get("podman_packages") or table["podman"])
            + (["fuse-overlayfs"] if storage_driver == "fuse-overlayfs" else []))


def storage_plan(settings: dict, engine: str, storage: dict, host: str) -> dict:
    """podman's storage driver: the one to set ('' for podman's own choice), why, what
    storage.conf gets, and the report line where podman is not asked (``report``)."""
    setting = settings.get("podman_storage_driver") or "auto"
    driver = "" if engine != "podman" else (setting if setting != "auto"
                                            else storage.get("auto_driver") or "")
    why = ((storage.get("auto_why") or "") if setting == "auto"
           else f"container_runtime_podman_storage_driver is {setting}")
    shown = driver or "as configured"
    tail = f" ({'set by rdmaprov' if driver else OWN_CHOICE}: {why})"
    conf = storage.get("conf") or {}
    out = {
        "driver": driver, "why": why, "shown": shown, "tail": tail,
        "report": f"podman storage: {shown}{tail}",
        # storage.conf's driver line: fuse-overlayfs is the overlay driver with its mount program.
        "conf_driver": "overlay" if driver == "fuse-overlayfs" else driver,
        "mount_program": storage.get("fuse_overlayfs") or FUSE_MOUNT_PROGRAM,
        "write_conf": bool(driver) and not conf.get("exists"),
        "conf_path": conf.get("path") or "/etc/containers/storage.conf",
        "graphroot": storage.get("graphroot"),
        "failure": (f"{host}: podman cannot use its storage (driver "
                    f"{driver or 'of ' + OWN_CHOICE}, "
                    f"{storage.get('graphroot')} on {storage.get('fstype')})"),
    }
    out["edits"] = storage_edits(out, bool(conf.get("exists")))
    return out


def nvidia_source(settings: dict) -> dict:
    """NVIDIA's container toolkit source: whether to add one (``add``), its signing key
    (``key``), the apt source line (``apt``, $(ARCH) made amd64 or arm64) and the dnf baseurl
    (``yum``); a local mirror's where container_runtime_nvidia_repo is local."""
    repo = settings.get("nvidia_repo") or "nvidia"
    local = settings.get("nvidia_local_repo") or ""
    arch = "arm64" if settings.get("architecture") == "aarch64" else "amd64"
    url = str(settings.get("nvidia_repo_url") or "").replace("$(ARCH)", arch)
    return {"add": repo != "none", "key": repo == "nvidia",
            "apt": local if repo == "local" else (
                f"deb [signed-by={NVIDIA_KEYRING}] {url} /"),
            "yum": local if repo == "local" else NVIDIA_RPM_URL}


def merge(base: dict, extra: dict) -> dict:
    """Ansible's combine(recursive=true): dicts merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def daemon_json(settings: dict, gpu: bool, docker_feature: bool, current: dict) -> tuple:
    """(text, error): docker's daemon.json with rdmaprov's keys merged into the host's (other
    keys kept), as to_nice_json(indent=2) writes it; error names a daemon.json that is not a
    JSON object."""
    path = settings.get("docker_daemon_json")
    text = (current or {}).get("text")
    if (current or {}).get("error"):
        return None, f"{path}: cannot read it: {current['error']}"
    try:
        have = json.loads(text) if text is not None else {}
    except ValueError as exc:
        return None, f"{path} is not valid JSON ({exc}): fix or remove it"
    if not isinstance(have, dict):
        return None, f"{path} is not a JSON object: fix or remove it"
    ours: dict = {}
    if settings.get("memlock") == "unlimited":
        ours = merge(ours, {"default-ulimits": {"memlock": {"Name": "memlock", "Hard": -1,
                                                            "Soft": -1}}})
    if gpu and settings.get("nvidia_mode") in ("runtime", "both"):
        ours = merge(ours, {"runtimes": {"nvidia": {"path": "nvidia-container-runtime",
                                                    "args": []}}})
    if gpu and settings.get("nvidia_default_runtime"):
        ours = merge(ours, {"default-runtime": "nvidia"})
    # docker >= 25 reads CDI specs (the RDMA one, NVIDIA's) only with this feature on.
    if docker_feature:
        ours = merge(ours, {"features": {"cdi": True}})
    ours = merge(ours, settings.get("docker_daemon_options") or {})
    merged = merge(have, ours)
    return json.dumps(merged, indent=2, sort_keys=True, separators=(",", ": ")) + "\n", None


def limits_conf(managed: str) -> str:
    """limits.d: unlimited locked memory for every login session."""
    return (state_drift.header(managed) + "\n"
            "# RDMA pins memory: unlimited locked memory for every login ('*' does not cover"
            " root).\n"
            "*    soft memlock unlimited\n*    hard memlock unlimited\n"
            "root soft memlock unlimited\nroot hard memlock unlimited\n")


def systemd_conf(managed: str) -> str:
    """system.conf.d: unlimited locked memory for services."""
    return (state_drift.header(managed) + "\n"
            "# RDMA pins memory: unlimited locked memory for services (the engine daemons,"
            " slurmd).\n[Manager]\nDefaultLimitMEMLOCK=infinity\n")


def podman_conf(managed: str, memlock: str, pids, pids_controller: bool) -> str:
    """containers.conf.d: the engine's default ulimits (memlock unlimited) and pids_limit
    (None: no line)."""
    text = state_drift.header(managed) + "\n[containers]\n"
    if memlock == "unlimited":
        text += '# RDMA pins memory.\ndefault_ulimits = ["memlock=-1:-1"]\n'
    if pids is not None:
        if not pids_controller:
            text += ("# This host's cgroup has no pids controller: any pids limit makes every"
                     " container fail to start.\n")
        text += f"pids_limit = {pids}\n"
    return text


def storage_conf(managed: str, storage: dict) -> str:
    """podman's storage.conf where there is none yet: the driver (fuse-overlayfs: overlay
    with its mount program) and where podman keeps its images."""
    text = (state_drift.header(managed) + "\n"
            "# containers-storage: where podman keeps images and containers, and with which"
            " driver.\n[storage]\n"
            f'driver = "{storage["conf_driver"]}"\nrunroot = "/run/containers/storage"\n'
            f'graphroot = "{storage["graphroot"] or ""}"\n')
    if storage["driver"] == "fuse-overlayfs":
        text += f'\n[storage.options.overlay]\nmount_program = "{storage["mount_program"]}"\n'
    return text


def storage_edits(storage: dict, conf_exists: bool) -> list[dict]:
    """A site's own storage.conf: the lineinfile edits ({path, regexp, line, after}) that set
    the driver, and fuse-overlayfs as the overlay driver's mount program."""
    if not storage["driver"] or not conf_exists:
        return []
    path = storage["conf_path"]
    edits = [{"path": path, "regexp": r"^\s*driver\s*=",
              "line": f'driver = "{storage["conf_driver"]}"', "after": r"^\[storage\]\s*$"}]
    if storage["driver"] == "fuse-overlayfs":
        edits += [{"path": path, "regexp": r"^\[storage\.options\.overlay\]\s*$",
                   "line": "[storage.options.overlay]", "after": "EOF"},
                  {"path": path, "regexp": r"^\s*#?\s*mount_program\s*=",
                   "line": f'mount_program = "{storage["mount_program"]}"',
                   "after": r"^\[storage\.options\.overlay\]\s*$"}]
    return edits


def step(label: str, module: str, args: dict, **extra) -> dict:
    """One step of the role's apply (action container_runtime_apply): the module and its
    arguments; ``check_mode`` False runs it under --check too, ``changed`` overrides what it
    says, ``only_if`` ({argv, stdout}) runs it only where that command prints that, and ``then``
    (steps) runs where it changed (what a handler did)."""
    return {"label": label, "module": "ansible.builtin." + module, "args": args, **extra}


def install_steps(settings: dict, plan: dict) -> list[dict]:
    """The engine's and NVIDIA's toolkit packages (with NVIDIA's package source) as the OS
    family installs them, then docker's daemon started: the steps of the install tasks."""
    steps = []
    source = plan["nvidia_source"]
    nvidia_packages = list(settings.get("nvidia_packages") or [])
    key_url = settings.get("nvidia_repo_key_url")
    if settings.get("os_family") == "RedHat":
        if plan["install_engine"]:
            steps.append(step("engine: " + " ".join(plan["packages"]), "dnf",
                              {"name": plan["packages"], "state": "present"}))
        if plan["gpu"] and source["add"]:
            steps.append(step("NVIDIA's package source", "yum_repository", {
                "name": "nvidia-container-toolkit", "description": "NVIDIA container toolkit",
                "baseurl": source["yum"], "gpgkey": key_url, "gpgcheck": source["key"]}))
        if plan["gpu"]:
            steps.append(step("NVIDIA: " + " ".join(nvidia_packages), "dnf",
                              {"name": nvidia_packages, "state": "present"}))
    else:
        # cache_valid_time 0 where apt's index had no candidate for the engine when probed.
        if plan["apt_install_engine"]:
            steps.append(step("engine: " + " ".join(plan["packages"]), "apt", {
                "name": plan["packages"], "state": "present", "update_cache": True,
                "cache_valid_time": plan["apt_cache_valid_time"]}))
        if plan["docker_cli_check"]:
            steps.append(step("docker's client (docker-cli), where packaged apart", "apt",
                              {"name": "docker-cli", "state": "present"},
                              only_if={"argv": ["sh", "-c", DOCKER_CLI_SCRIPT],
                                       "stdout": "package"}))
        if plan["gpu"] and source["key"]:
            steps.append(step("NVIDIA's signing key", "get_url",
                              {"url": key_url, "dest": NVIDIA_KEYRING, "mode": "0644"}))
        if plan["gpu"] and source["add"]:
            steps.append(step("NVIDIA's (or a local) package source", "copy",
                              {"dest": NVIDIA_APT_LIST, "mode": "0644", "content": source["apt"]}))
        if plan["gpu"] and plan["apt_module"]:
            steps.append(step("NVIDIA: " + " ".join(nvidia_packages), "apt", {
                "name": nvidia_packages, "state": "present", "update_cache": True}))
    if not plan["install"]:
        steps = []
    if plan["start_docker"]:
        steps.append(step("docker started", "systemd_service",
                          {"name": "docker", "state": "started", "enabled": True}))
    return steps


def configure_steps(settings: dict, plan: dict, can_raise: bool) -> list[dict]:
    """What the configure tasks write, each step naming its ``path``: the directories, the
    drop-ins, storage.conf and the RDMA CDI spec and enroot's files as rendered, systemd's
    drop-in (systemd re-executed where it changed and the hard limit can be raised), a site's
    own storage.conf edited, docker's daemon.json (docker restarted where it changed), the RDMA
    CDI spec removed where nothing goes in it, NVIDIA's CDI spec generated and installed where
    it differs."""
    steps = [dict(step(path, "file", {"path": path, "state": "directory", "mode": "0755"}),
                  path=path) for path in plan["dirs"]]
    reexec = [step("re-execute systemd", "systemd_service", {"daemon_reexec": True})]
    for item in plan["writes"] + plan["systemd_dropin"]:
        then = {"then": reexec} if item in plan["systemd_dropin"] and can_raise else {}
        steps.append(dict(step(item["path"], "copy", {
            "dest": item["path"], "content": item["content"], "mode": item["mode"]}),
            path=item["path"], **then))
    steps += [dict(step(edit["line"], "lineinfile", {
        "path": edit["path"], "regexp": edit["regexp"], "line": edit["line"],
        "insertafter": edit["after"]}), path=edit["path"]) for edit in plan["storage"]["edits"]]
    if plan["daemon_json"] is not None:
        path = settings.get("docker_daemon_json")
        restart = step("restart docker", "systemd_service",
                       {"name": "docker", "state": "restarted"})
        steps.append(dict(step(path, "copy", {"dest": path, "content": plan["daemon_json"],
                                              "mode": "0644"}), path=path, then=[restart]))
    steps += [dict(step(path, "file", {"path": path, "state": "absent"}), path=path)
              for path in plan["remove"]]
    if plan["nvidia_cdi"]:
        spec = settings.get("cdi_spec")
        steps += [dict(step("generate NVIDIA's CDI spec", "command", {
            "argv": ["nvidia-ctk", "cdi", "generate", "--output", NVIDIA_CDI_TMP]},
            check_mode=False, changed=False), path=NVIDIA_CDI_TMP),
            dict(step(spec, "copy", {"src": NVIDIA_CDI_TMP, "remote_src": True, "dest": spec,
                                     "mode": "0644"}), path=spec)]
    return steps


def image_steps(plan: dict) -> list[dict]:
    """The image files copied from the control host (into their directories), then the images
    the engine did not have when probed loaded from their files (the load's argv)."""
    steps = [step(path, "file", {"path": path, "state": "directory", "mode": "0755"})
             for path in plan["image_dirs"]]
    steps += [step(i["archive"], "copy", {"src": i["src"], "dest": i["archive"], "mode": "0644"})
              for i in plan["images_to_copy"]]
    steps += [step(i["name"], "command", {"argv": i["argv"]}, changed=True)
              for i in plan["images_to_load"]]
    return steps


def verify_plan(settings: dict, facts: dict, engine: str, cdi: dict, memlock_note: str) -> dict:
    """The check container: whether it runs, its argv, what it must see, the messages' parts."""
    host = settings.get("host") or "?"
    image = settings.get("verify_image") or ""
    names = [i.get("name") for i in settings.get("images") or []]
    kind = settings.get("rdma_cdi_kind") or ""
    podman = engine == "podman"
    host_memlock = settings.get("memlock") == "host"
    ib = list(facts.get("infiniband_devices") or [])
    rdma = facts.get("rdma_cdi") or {}
    argv = ["timeout", "-k", "5", str(settings.get("verify_timeout")), engine, "run", "--rm",
            "--pull", "never" if image in names else "missing", "--network", "host"]
    if cdi["verify"]:
        # The engine reads the spec: its devices, mounts and variables come with --device.
        argv += ["--ipc", "host", "--device", f"{kind}=all"]
        argv += ["--ulimit", "host"] if host_memlock and podman else []
        nodes = (((rdma.get("spec") or {}).get("devices") or [{}])[0]
                 .get("containerEdits") or {}).get("deviceNodes") or []
        wanted_ib = [posixpath.basename(n["path"]) for n in nodes]
    else:
        # docker < 25 or no spec: the host's RDMA device files one by one, IPC_LOCK, memlock.
        argv += ["--cap-add", "IPC_LOCK"]
        if host_memlock:
            argv += ["--ulimit", "host"] if podman else []
        else:
            argv += ["--ulimit", "memlock=-1:-1"]
        argv += ["--device=" + d for d in ib]
        wanted_ib = [posixpath.basename(d) for d in ib]
    argv += list(settings.get("verify_args") or []) + [image, "sh", "-c", CHECK_SCRIPT]
    settings_seen = ((rdma.get("nccl_conf") or {}).get("settings") or {})
    wanted_nccl = [line for line in (f"{k}={v}" for k, v in settings_seen.items())
                   if line.startswith("NCCL_")]
    if cdi["verify"]:
        wanted = (f" through {kind}=all; wanted [{' '.join(wanted_ib)}] and "
                  f"[{', '.join(wanted_nccl)}] (the host's {settings.get('rdma_cdi_nccl_conf')})")
    else:
        wanted = f"; the host has {len(wanted_ib)} RDMA device files"
    return {
        "run": (engine in ENGINES and not settings.get("check_mode") and bool(image)
                and settings.get("verify", True)),
        "host": host, "argv": argv, "cdi": cdi["verify"], "wanted_ib": sorted(wanted_ib),
        "wanted_nccl": sorted(wanted_nccl), "unlimited": settings.get("memlock") == "unlimited",
        "label": f"{engine} container" + (f" with {kind}=all" if cdi["verify"] else ""),
        "memlock_note": memlock_note, "wanted": wanted,
        "start_failure": f"{host}: a {engine} container with image {image} did not start",
        "hint": "" if image in names else NO_REGISTRY,
    }


def seen_in_check(stdout: str) -> dict:
    """What the check container printed (CHECK_SCRIPT): memlock, ib, conf, and nccl (its
    NCCL_* lines)."""
    lines = stdout.splitlines()
    seen: dict = {"memlock": "", "ib": "", "conf": ""}
    seen.update(line.split("=", 1) for line in lines
                if line.split("=", 1)[0] in ("memlock", "ib", "conf") and "=" in line)
    seen["nccl"] = [line[len("nccl="):] for line in lines if line.startswith("nccl=")]
    return seen


def judge_check(verify: dict, rc: int, stdout: str, stderr: str) -> tuple[str | None, str]:
    """(failure, report) of the check container (verify_plan's ``verify``, its exit status and
    output): the failure names what the container did not start with or did not see (None:
    none); the report says what a container gets here."""
    if rc != 0:
        said = [line for line in stderr.splitlines() if line]
        return (f"{verify['start_failure']} ({'timed out' if rc == 124 else f'exit {rc}'}): "
                f"{said[-1] if said else 'no message'}{verify['hint']}"), ""
    seen = seen_in_check(stdout)
    ib = seen["ib"].strip()
    ok = (sorted(ib.split()) == sorted(verify["wanted_ib"])
          and (not verify["unlimited"] or seen["memlock"] == "unlimited")
          and (not verify["cdi"] or sorted(seen["nccl"]) == sorted(verify["wanted_nccl"])))
    if not ok:
        return (f"{verify['host']}: the container sees memlock {seen['memlock']}, /dev/infiniband"
                f" [{ib}]" + (f" and NCCL settings [{', '.join(seen['nccl'])}]"
                              if verify["cdi"] else "") + verify["wanted"]), ""
    report = (f"{verify['label']}: ulimit -l {seen['memlock']}"
              + (verify["memlock_note"] if seen["memlock"] != "unlimited" else "")
              + f"; /dev/infiniband: {ib or 'not applicable on this host: no /dev/infiniband'}")
    if verify["cdi"]:
        report += (f"; /etc/nccl.conf: {len(seen['nccl'])} NCCL settings, as on the host"
                   f" (NCCL_CONF_FILE={seen['conf']})")
    return None, report


def judge_storage(storage: dict, rc: int, stdout: str, stderr: str) -> tuple[str | None, str]:
    """(failure, report) of `podman info`'s storage driver (storage_plan's ``info_argv``): the
    failure says podman cannot use its storage (None: it can); the report names the driver
    podman runs."""
    if rc != 0:
        said = [line for line in stderr.splitlines() if line]
        return (f"{storage['failure']}: {said[-1] if said else f'exit {rc}'}; set"
                " container_runtime_podman_storage_driver (vfs works on any filesystem)"), ""
    return None, f"podman storage: {stdout.strip() or storage['shown']}{storage['tail']}"


def plan(facts: dict, settings: dict) -> dict:
    """One host's probe (engines, nvidia, infiniband_devices, memlock, pids_controller, systemd,
    storage, images_missing, file_state, rdma_cdi as cdi_spec plans it, daemon_json as read) +
    the role's settings (SETTINGS) -> what the role does here.

    Returns ``engine``, ``gpu``, ``packages``, ``install_engine``, ``install`` (the engine or
    NVIDIA's toolkit), ``apt_module`` (the apt module may run: python3-apt there, or not under
    --check), ``apt_install_engine`` (both), ``apt_cache_valid_time`` (0 where apt's index has no candidate for the engine),
    ``docker_cli_check``, ``pids_limit``
    (None: no line), ``memlock_why``, ``storage`` (storage_plan, with ``conf_text``,
    ``ask_podman`` and ``info_argv``), ``dirs`` (of the drop-ins), ``dropins`` and
    ``systemd_dropin`` (rdmaprov's drop-ins: [{path, mode, content}]), ``files`` (the RDMA CDI
    spec, enroot's: [{path, mode, content}]), ``file_dirs``, ``remove`` (the RDMA CDI spec
    when nothing goes in it), ``rdma_cdi_content`` (the spec's text, None: remove it),
    ``nvidia_cdi``, ``nvidia_source``, ``daemon_json`` (its text, None: not docker),
    ``images_to_copy``, ``image_dirs`` and ``images_to_load``, ``cdi`` ({engine, ready,
    verify}), ``verify`` (verify_plan), ``drift`` (anything to do) and ``drift_why``,
    ``errors`` (what to refuse, one line each) and ``refusal`` (them in one line), ``report``
    (the host's report lines: where something converges, and not under --check, without
    podman's storage, which podman info reports then), and the steps the role's apply tasks
    run: ``install_steps``, ``configure_steps`` and ``image_steps`` (step()).
    """
    host = settings.get("host") or "?"
    engines = facts.get("engines") or {}
    nvidia = facts.get("nvidia") or {}
    memlock = facts.get("memlock") or {}
    rdma = facts.get("rdma_cdi") or {}
    engine = pick_engine(settings.get("engine") or "auto", engines)
    gpu = wants_gpu(settings.get("nvidia", "auto"), int(nvidia.get("gpus") or 0))
    why_memlock = memlock_why(memlock)
    storage = storage_plan(settings, engine, facts.get("storage") or {}, host)
    install_engine = bool(settings.get("install")) and engine != "none"
    systemd = bool(facts.get("systemd"))

    managed = settings.get("managed") or "Ansible managed"
    pids = pids_limit(settings.get("pids_limit", "auto"), bool(facts.get("pids_controller")))
    # rdmaprov's drop-ins, as the configure tasks write them (the systemd one re-executes
    # systemd, so it comes apart from the others).
    dropins = [{"path": settings.get("limits_file"), "mode": "0644",
                "content": limits_conf(managed)}]
    if engine == "podman":
        dropins.append({"path": settings.get("podman_conf"), "mode": "0644",
                        "content": podman_conf(managed, str(settings.get("memlock")), pids,
                                               bool(facts.get("pids_controller")))})
    systemd_dropin = ([{"path": settings.get("systemd_dropin"), "mode": "0644",
                        "content": systemd_conf(managed)}] if systemd else [])

    content = rdma.get("content") if rdma else None
    enroot_files = [{"path": path, "mode": "0644", "content": text}
                    for path, text in (rdma.get("enroot") or {}).items()]
    files = ([{"path": settings.get("rdma_cdi_spec"), "mode": "0644", "content": content}]
             if content is not None else []) + enroot_files

    # Does the engine read the spec (podman; docker >= 25 once daemon.json enables CDI)?
    cdi_engine = ((rdma.get("engines") or {}).get(engine)
                  or {"cdi": False, "why": f"no container engine ({engine})"})
    ready = content is not None and bool(cdi_engine.get("cdi"))
    # The check container goes through the spec when the engine reads it and the NCCL file it
    # mounts is there (a missing mount source stops the container from starting).
    verify_cdi = ready and (not settings.get("rdma_cdi_nccl_conf")
                            or bool((rdma.get("nccl_conf") or {}).get("exists")))
    cdi = {"engine": cdi_engine, "ready": ready, "verify": verify_cdi}

    text, json_error = (daemon_json(settings, gpu, bool(rdma.get("docker_feature")),
                                    facts.get("daemon_json") or {})
                        if engine == "docker" else (None, None))
    container_engine = engine in ENGINES
    # No engine: no image to copy or load.
    images = (settings.get("images") or []) if container_engine else []
    images_to_copy = [i for i in images if "src" in i]
    missing = facts.get("images_missing") or []

    errors = []
    if engine != "none" and not settings.get("install") and engine not in engines:
        errors.append(f"{host}: container engine {engine} is not installed and "
                      "container_runtime_install is false")
    if str(settings.get("nvidia", "auto")).lower() == "true" and not nvidia.get("gpus"):
        errors.append(f"{host}: container_runtime_nvidia is true but the host shows no NVIDIA GPU"
                      " (no /proc/driver/nvidia/gpus, no /dev/nvidia0): install the driver first")
    if settings.get("memlock") == "unlimited" and not memlock.get("can_raise"):
        errors.append(f"{host}: {why_memlock}; RDMA needs unlimited locked memory. Set "
                      "container_runtime_memlock: host to accept the host's limit here.")
    if json_error:
        errors.append(f"{host}: {json_error}")

    # Anything to do. What is probed: the engine installed, the drop-ins, the images loaded. What
    # is not, and so goes through the tasks each run: docker's daemon.json, NVIDIA's toolkit and
    # CDI spec, a storage driver set in storage.conf, image files copied from the control host.
    # What the probe read to differ (differs), and what it cannot read (unprobed): both send the
    # role through its tasks; `rdmaprov status` marks only the first.
    missing_engine, unprobed = [], []
    if install_engine and not (engines.get(engine) or {}).get("usable"):
        missing_engine.append(f"{engine} is not installed (or does not answer)")
    if engine == "docker":
        unprobed.append("docker's daemon.json and daemon are not probed")
    if gpu:
        unprobed.append("NVIDIA's toolkit and CDI spec are not probed")
    if storage["driver"]:
        unprobed.append(f"podman's storage driver {storage['driver']} is set in storage.conf")
    if images_to_copy:
        unprobed.append("image files are copied from the control host")
    differs = missing_engine + [f"image {name} is missing"
                                for name in facts.get("images_missing") or []]
    differs += state_drift.compare(facts.get("file_state") or {}, {},
                                   dropins + systemd_dropin + files, [])
    differs += list(rdma.get("drift") or [])
    drift_why = missing_engine + unprobed + differs[len(missing_engine):]
    drift = bool(drift_why)

    gpus = int(nvidia.get("gpus") or 0)
    converging = [] if gpu else [GPU_OFF.format(gpus=gpus) if gpus else NO_GPU]
    if not facts.get("infiniband_devices"):
        converging.append(NO_IB)
    if rdma.get("report"):
        converging.append(f"RDMA CDI spec {settings.get('rdma_cdi_spec')}: "
                          + "; ".join(rdma["report"]))
    if rdma and engine in ENGINES and not cdi_engine.get("cdi"):
        converging.append(f"RDMA CDI spec: {cdi_engine.get('why')}")
    if not memlock.get("can_raise"):
        converging.append(f"{why_memlock}: containers keep the host limit (engine default"
                          " ulimits not written)")
    tail = []
    if engine in ENGINES and not settings.get("verify_image"):
        tail.append(f"{engine} container: not checked: container_runtime_verify_image is empty,"
                    " so memlock and /dev/infiniband inside containers are unproven on this host")
    report = converging + ([storage["report"]] if engine == "podman" else []) + tail

    memlock_note = f" ({why_memlock if not memlock.get('can_raise') else 'memlock policy host'})"
    storage.update(
        conf_text=(storage_conf(managed, storage) if storage["write_conf"] else None),
        # Read-only; not under --check, where a storage.conf to be written is not there yet.
        ask_podman=engine == "podman" and not settings.get("check_mode"),
        info_argv=["podman", "info", "--format", "{{.Store.GraphDriverName}}"])
    apt = settings.get("os_family") != "RedHat"
    # A fresh image can carry an index that is recent by its date but lists nothing: then
    # the install refreshes it whatever its age.
    candidate = facts.get("apt_candidate")
    engine_packages = packages(settings, engine, storage["driver"])
    apt_module = bool(settings.get("python_apt", True)) or not settings.get("check_mode")
    out = {
        "engine": engine, "gpu": gpu, "container_engine": container_engine,
        "packages": engine_packages,
        "install_engine": install_engine, "install": install_engine or gpu,
        # Without python3-apt the apt module installs it, which --check must not.
        "apt_module": apt_module,
        "apt_install_engine": install_engine and apt_module,
        "apt_cache_valid_time": (settings.get("apt_cache_valid_time")
                                 if candidate or not (apt and install_engine) else 0),
        # Debian 13 split docker's client out of docker.io: whether to look for docker-cli
        # after the install (the role's own docker packages stay as given).
        # (Not where the apt module may not run: nothing would install what it finds.)
        "docker_cli_check": (apt and install_engine and engine == "docker"
                             and not settings.get("docker_packages") and apt_module),
        "start_docker": engine == "docker" and systemd,
        "pids_limit": pids,
        "pids_controller": bool(facts.get("pids_controller")),
        "memlock_why": why_memlock, "storage": storage, "systemd": systemd,
        # The directories of the drop-ins, of the RDMA CDI spec and of enroot's files.
        "dirs": ([posixpath.dirname(t["path"]) for t in dropins[:1] + systemd_dropin + dropins[1:]]
                 + list(dict.fromkeys(posixpath.dirname(f["path"]) for f in files))),
        "dropins": dropins, "systemd_dropin": systemd_dropin, "files": files,
        # What the role writes as the plan renders it ({path, mode, content}): the drop-ins but
        # systemd's (which re-executes systemd), storage.conf where there is none yet, the RDMA
        # CDI spec and enroot's files.
        "writes": (dropins + ([{"path": storage["conf_path"], "mode": "0644",
                                "content": storage["conf_text"]}] if storage["write_conf"] else [])
                   + files),
        "rdma_cdi_content": content,
        # The RDMA CDI spec to remove (nothing to put in it).
        "remove": ([settings.get("rdma_cdi_spec")]
                   if settings.get("rdma_cdi") and content is None else []),
        "nvidia_cdi": gpu and settings.get("nvidia_mode") in ("cdi", "both"),
        "nvidia_source": nvidia_source(settings),
        "daemon_json": text,
        "images_to_copy": images_to_copy,
        "image_dirs": list(dict.fromkeys(posixpath.dirname(i["archive"]) for i in images_to_copy)),
        # The images the engine did not have when probed: loaded from their files.
        # (argv: LOAD_SCRIPT with the engine, the file, the name and the format.)
        "images_to_load": [{"name": i.get("name"), "archive": i.get("archive"),
                            "format": i.get("format") or "auto",
                            "argv": ["sh", "-ec", LOAD_SCRIPT, "sh", engine, str(i.get("archive")),
                                     str(i.get("name")), i.get("format") or "auto"]}
                           for i in images if i.get("name") in missing],
        "cdi": cdi,
        "verify": verify_plan(settings, facts, engine, cdi, memlock_note),
        "drift": drift, "drift_why": drift_why, "differs": differs, "unprobed": unprobed,
        "errors": errors,
        "refusal": "; ".join(errors),
        # Where something converges (and not under --check), podman info reports podman's
        # storage (configure.yml), so the plan's line for it goes.
        "report": converging + tail if drift and not settings.get("check_mode") else report,
    }
    # What the role's apply tasks run (action container_runtime_apply), step by step.
    out.update(install_steps=install_steps(settings, out),
               configure_steps=configure_steps(settings, out, bool(memlock.get("can_raise"))),
               image_steps=image_steps(out))
    return out
