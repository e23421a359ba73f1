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
# What the check container prints (sh builtins only: the check image needs only sh, ls and tr).
CHECK_SCRIPT = (
    'echo "memlock=$(ulimit -l)"; echo "ib=$(ls /dev/infiniband 2>/dev/null | tr "\\n" " ")";'
    ' echo "conf=${NCCL_CONF_FILE:-}"; [ -r /etc/nccl.conf ] && while IFS= read -r l'
    ' || [ -n "$l" ]; do case "$l" in NCCL_*) echo "nccl=$l";; esac; done < /etc/nccl.conf;'
    ' true')
NO_GPU = "NVIDIA toolkit: not applicable on this host: no NVIDIA GPU (no /proc/driver/nvidia/gpus)"
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
    return {
        "driver": driver, "why": why, "shown": shown, "tail": tail,
        "report": f"podman storage: {shown}{tail}",
        # storage.conf's driver line: fuse-overlayfs is the overlay driver with its mount program.
        "conf_driver": "overlay" if driver == "fuse-overlayfs" else driver,
        "mount_program": storage.get("fuse_overlayfs") or FUSE_MOUNT_PROGRAM,
        "write_conf": bool(driver) and not conf.get("exists"),
        "edit_conf": bool(driver) and bool(conf.get("exists")),
        "edit_mount_program": driver == "fuse-overlayfs" and bool(conf.get("exists")),
        "graphroot": storage.get("graphroot"),
        "failure": (f"{host}: podman cannot use its storage (driver "
                    f"{driver or 'of ' + OWN_CHOICE}, "
                    f"{storage.get('graphroot')} on {storage.get('fstype')})"),
    }


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
        "run": engine in ENGINES and not settings.get("check_mode") and bool(image),
        "argv": argv, "cdi": cdi["verify"], "wanted_ib": sorted(wanted_ib),
        "wanted_nccl": sorted(wanted_nccl), "unlimited": settings.get("memlock") == "unlimited",
        "label": f"{engine} container" + (f" with {kind}=all" if cdi["verify"] else ""),
        "memlock_note": memlock_note, "wanted": wanted,
        "start_failure": f"{host}: a {engine} container with image {image} did not start",
        "hint": "" if image in names else NO_REGISTRY,
    }


def plan(facts: dict, settings: dict) -> dict:
    """One host's probe (engines, nvidia, infiniband_devices, memlock, pids_controller, systemd,
    storage, images_missing, file_state, rdma_cdi as cdi_spec plans it, daemon_json as read) +
    the role's settings (SETTINGS) -> what the role does here.

    Returns ``engine``, ``gpu``, ``packages``, ``install_engine``, ``install`` (the engine or
    NVIDIA's toolkit), ``setup_tasks`` (the OS family's install tasks), ``pids_limit`` (None: no
    line), ``memlock_why``, ``storage`` (storage_plan), ``dirs`` (of the drop-ins),
    ``templates`` (the drop-ins the role renders: [{path, src}]), ``files`` (those rendered
    here: the RDMA CDI spec, enroot's: [{path, mode, content}]), ``rdma_cdi_content`` (the
    spec's text, None: remove it), ``enroot_files`` and ``enroot_dirs``, ``nvidia_cdi``,
    ``nvidia_source``, ``daemon_json`` (its text, None: not docker), ``images_to_copy`` and
    ``image_dirs``, ``cdi`` ({engine, ready, verify}), ``verify`` (verify_plan), ``drift``
    (anything to do, but for the rendered drop-ins, which the role compares) and ``drift_why``,
    ``errors`` (what to refuse, one line each), ``report`` (the host's report where nothing
    converges) and ``report_converging`` (where something does: podman info reports the storage
    then).
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

    templates = [{"path": settings.get("limits_file"), "src": "limits-memlock.conf.j2"}]
    if systemd:
        templates.append({"path": settings.get("systemd_dropin"), "src": "systemd-memlock.conf.j2"})
    if engine == "podman":
        templates.append({"path": settings.get("podman_conf"), "src": "podman-containers.conf.j2"})

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
    images_to_copy = [i for i in settings.get("images") or [] if "src" in i]

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
    drift_why = []
    if install_engine and not (engines.get(engine) or {}).get("usable"):
        drift_why.append(f"{engine} is not installed (or does not answer)")
    if engine == "docker":
        drift_why.append("docker's daemon.json and daemon are not probed")
    if gpu:
        drift_why.append("NVIDIA's toolkit and CDI spec are not probed")
    if storage["driver"]:
        drift_why.append(f"podman's storage driver {storage['driver']} is set in storage.conf")
    if images_to_copy:
        drift_why.append("image files are copied from the control host")
    drift_why += [f"image {name} is missing" for name in facts.get("images_missing") or []]
    drift_why += state_drift.compare(facts.get("file_state") or {}, {}, files, [])
    drift_why += list(rdma.get("drift") or [])
    drift = bool(drift_why)

    converging = [NO_GPU] if not gpu else []
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
    return {
        "engine": engine, "gpu": gpu, "container_engine": engine in ENGINES,
        "packages": packages(settings, engine, storage["driver"]),
        "install_engine": install_engine, "install": install_engine or gpu,
        # The install tasks of the OS family (Debian's where there are none of its own).
        "setup_tasks": ("setup-RedHat.yml" if settings.get("os_family") == "RedHat"
                        else "setup-Debian.yml"),
        "start_docker": engine == "docker" and systemd,
        "pids_limit": pids_limit(settings.get("pids_limit", "auto"),
                                 bool(facts.get("pids_controller"))),
        "pids_controller": bool(facts.get("pids_controller")),
        "memlock_why": why_memlock, "storage": storage, "systemd": systemd,
        "dirs": [posixpath.dirname(t["path"]) for t in templates],
        "templates": templates, "files": files, "rdma_cdi": bool(settings.get("rdma_cdi")),
        "rdma_cdi_content": content,
        "enroot_files": enroot_files,
        "enroot_dirs": list(dict.fromkeys(posixpath.dirname(f["path"]) for f in enroot_files)),
        "nvidia_cdi": gpu and settings.get("nvidia_mode") in ("cdi", "both"),
        "nvidia_source": nvidia_source(settings),
        "daemon_json": text,
        "images_to_copy": images_to_copy,
        "image_dirs": list(dict.fromkeys(posixpath.dirname(i["archive"]) for i in images_to_copy)),
        "cdi": cdi,
        "verify": verify_plan(settings, facts, engine, cdi, memlock_note),
        "drift": drift, "drift_why": drift_why, "errors": errors,
        "report": report, "report_converging": converging + tail,
    }
