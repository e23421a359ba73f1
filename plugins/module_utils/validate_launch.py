# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The nccl_validate role's rules, in one tested place: which hosts run together, the
rendezvous address, what to refuse before the launch, the image preflight's verdict, the argv
that starts the worker on a host (torchrun or direct, on the host or wrapped in a container
engine), the early stop of a run and a failed part's one line. The role's modules run them
(nccl_validate_probe: plan(), rendezvous_of(), part_failure(); nccl_validate_preflight: the
image preflight and launch(); the nccl_validate_wait action: watch(), stop_reason()); unit tests
import them directly (tests/unit/test_validate_launch.py). Standard library and ranges.py only.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping

from ansible_collections.rdmaprov.cluster.plugins.module_utils import ranges

# Worker exit codes (roles/nccl_validate/files and rdmaprov/validate/worker_base.py agree on them).
RC_OK = 0
RC_FAILED = 1        # failed in the rendezvous or a collective: a peer may be the cause
RC_CANNOT_START = 2  # failed on this host before joining (no torch, no CUDA, bad arguments)
RC_WATCHDOG = 3      # the worker's own watchdog killed it: no progress within --timeout
# Exit codes of a host's part that say "this host could not run", so its peers need not wait:
# the worker's own two, and the engine's (125: engine error, 126/127: command not runnable).
OWN_FAILURES = (RC_CANNOT_START, RC_WATCHDOG, 125, 126, 127)


# --- who runs with whom -----------------------------------------------------------------------

def fabric_members(hosts, master):
    """The fabric run's hosts, rendezvous host first (it holds rank 0)."""
    hosts = list(dict.fromkeys(hosts))
    if master not in hosts:
        raise ValueError(f"rendezvous host {master} is not in this play")
    return [master] + [h for h in hosts if h != master]


# --- the preflight's plan: what a host's probe and the role's settings decide -------------------

# The role's settings the probe module takes (option settings): nccl_validate_* without the
# prefix, plus the play's hosts, this host's name and address (ansible_host).
PLAN_KEYS = (
    "hosts", "host", "address", "master_host", "master_port", "run_label", "runtime", "engine",
    "image", "python", "pythonpath", "container_args", "memlock", "devices", "cdi_device",
    "cdi_spec", "gpus", "host_rdma", "backend", "launcher", "nproc_per_node", "worker_args",
    "require_ib", "pairs", "pair_fraction", "bw_fraction", "min_busbw", "max_jitter", "rails",
    "rail_cuda", "rendezvous_timeout", "env", "env_override", "job_path", "nccl_debug",
    "nccl_debug_subsys",
    "remote_dir", "master_addr", "pull", "pull_timeout", "results_dir", "timeout",
    "poll_interval")


# The worker's parts, each imported from beside worker.py (its docstring says which is what).
WORKER_PARTS = ("worker_base.py", "worker_preflight.py", "worker_timing.py", "worker_rails.py",
                "worker_watchdog.py", "worker_join.py")


def worker_sources(worker, ports):
    """Name -> controller path of what runs wherever the worker runs, in the order the role
    copies them: ``worker`` (a worker.py), its parts and the pair planner from its folder (all
    standard library only), and the port reader ``ports`` (module_utils/rdma_ports.py)."""
    folder = os.path.dirname(worker)
    return {"worker.py": worker,
            **{name: os.path.join(folder, name) for name in WORKER_PARTS + ("rounds.py",)},
            "rdma_ports.py": ports}


def worker_copies(worker, ports, remote_dir):
    """The role's copies of worker_sources() to ``remote_dir``/bin: [{name, src, dest}]."""
    return [{"name": name, "src": src, "dest": f"{remote_dir}/bin/{name}"}
            for name, src in worker_sources(worker, ports).items()]


def worker_dirs(copies):
    """The directories the worker's files (worker_copies()) go into, each once, in order."""
    return list(dict.fromkeys(os.path.dirname(c["dest"]) for c in copies))


def own_of(master_probe):
    """The rendezvous host's own address for its peers ([address, where from], its plan's
    'own'), from its probe's result; None when its probe did not run or planned nothing."""
    plan = (master_probe or {}).get("plan") if isinstance(master_probe, Mapping) else None
    return plan.get("own") if isinstance(plan, Mapping) else None


def not_launched(all_hosts, ready_hosts):
    """The line that stops every host of the play when some failed the preflight (a missing
    peer would stall the others), or ''."""
    gone = [h for h in all_hosts if h not in ready_hosts]
    return f"not launched: {', '.join(gone)} failed the preflight" if gone else ""


def master_of(s):
    """The rendezvous host: nccl_validate_master_host, else the play's first host."""
    return s.get("master_host") or s["hosts"][0]


def _bool(value):
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on", "y", "t")


def nice_json(value):
    """A JSON file's text as the role writes it on the controller (Ansible's to_nice_json)."""
    return json.dumps(value, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def kept(directory, name, value):
    """One file the role keeps with the results on the controller: {dir, dest, content}; a
    value that is not text is written as JSON (nice_json)."""
    content = value + "\n" if isinstance(value, str) else nice_json(value)
    return {"dir": directory, "dest": f"{directory}/{name}", "content": content}


def plan(s, probe, check_mode=False):
    """One host's plan before the launch, from the role's settings ``s`` (PLAN_KEYS) and this
    host's probe: {'members': the fabric run's hosts, rendezvous host first; 'own': [address,
    where from], this host's address for its peers should it hold the rendezvous; 'settings':
    what the image preflight and the launch take (launch()'s keys, plus host, members,
    master_port, label, host_rdma, require_ib, the host's rdma-core, what the image step and
    the run take: pull, pull_timeout, timeout, poll_interval, results, this host's result
    directory on the controller); 'refuse': the lines that stop this host before anything
    runs, in the order the role used to assert them; 'rendezvous': what the rendezvous step
    takes (members, master_addr, host, refuse); 'keep': the files to keep with the results on
    the controller now (kept(): the host's nccl.conf settings, the job's, for the judge's
    comparison with what the worker applied, when the container gets the RDMA CDI device or
    the worker runs on the host; none in check mode); an NCCL_* value of nccl_validate_env
    that the host's nccl.conf (the probe's 'nccl_conf') does not hold is refused
    (job_path_differences) unless nccl_validate_job_path is false;
    'port_problem': why the rendezvous host cannot listen on its port, or ''}.
    Raises ValueError (one line) when the rendezvous host is not in the play."""
    members = fabric_members(s["hosts"], master_of(s))
    env = {**(s.get("env") or {}), **(s.get("env_override") or {})}
    runtime = s["runtime"]
    engine = probe.get("engine") or "none"
    cdi = probe.get("cdi") or {}
    gpu_count = int(probe.get("gpu_count") or 0)
    if str(s["nproc_per_node"]) != "auto":
        nproc = int(s["nproc_per_node"])
    else:
        nproc = max(gpu_count, 1) if s["backend"] == "nccl" else 1
    ifname = probe.get("local_ifname")
    settings = {
        "runtime": runtime, "engine": engine, "image": s["image"], "python": s["python"],
        "pythonpath": list(s.get("pythonpath") or []),
        "container_args": list(s.get("container_args") or []), "memlock": s["memlock"],
        "devices": (probe.get("ib_devices") or []) if s["devices"] == "auto" else s["devices"],
        # The job's path where the engine reads CDI specs; else the devices above.
        "cdi_device": s["cdi_device"] if cdi.get("engine_cdi") else "",
        "gpus": s["gpus"], "gpu_count": gpu_count, "backend": s["backend"],
        "launcher": s["launcher"], "nproc": nproc,
        "worker_args": list(s.get("worker_args") or []), "pairs": s["pairs"],
        "pair_fraction": s["pair_fraction"], "bw_fraction": s["bw_fraction"],
        "min_busbw": s["min_busbw"], "max_jitter": s["max_jitter"], "rails": s["rails"],
        "rail_cuda": _bool(s["rail_cuda"]), "rendezvous_timeout": s["rendezvous_timeout"],
        "env": env, "nccl_debug": s["nccl_debug"], "nccl_debug_subsys": s["nccl_debug_subsys"],
        # gloo binds to the address the hostname resolves to (127.0.1.1 on Debian): tell it
        # the interface that carries the inventory address instead.
        "auto_env": {"GLOO_SOCKET_IFNAME": ifname} if ifname and ifname != "lo" else {},
        "remote_dir": s["remote_dir"], "rdma_mounts": [], "torch_libuv": None,
        # What the image preflight and the launch need besides.
        "host": s["host"], "members": members, "master_port": int(s["master_port"]),
        "label": s["run_label"], "host_rdma": s["host_rdma"],
        "require_ib": require_ib(s["backend"], s["require_ib"], env),
        "rdma": probe.get("rdma") or {},
        "pull": s["pull"], "pull_timeout": int(s["pull_timeout"]), "timeout": int(s["timeout"]),
        "poll_interval": int(s["poll_interval"]),
        "results_dir": s["results_dir"],
        "results": f"{s['results_dir']}/{s['run_label']}/{s['host']}",
    }
    refuse = []
    if runtime != "host" and engine == "none":
        wanted = "neither podman nor docker" if s["engine"] == "auto" else s["engine"]
        refuse.append(f"no container engine: {wanted} is installed (set it up with the "
                      "container_runtime role, or use nccl_validate_runtime: host)")
    if settings["cdi_device"] and not cdi.get("exists"):
        refuse.append(f"RDMA CDI spec {s['cdi_spec']} is missing on this host "
                      f"({s['cdi_device']} cannot be given to the container): run bootstrap "
                      "(container_runtime role), or set nccl_validate_cdi_device to ''")
    # The job's path: what validate adds of NCCL's settings against the host's own nccl.conf,
    # which a job's container gets (the CDI device mounts it; the host runtime reads it).
    conf = probe.get("nccl_conf") or {}
    if _bool(s.get("job_path", True)):
        off_path = job_path_line(job_path_differences(s.get("env"), conf.get("settings") or {}),
                                 host_job_side(conf.get("path") or "/etc/nccl.conf"))
        if off_path:
            refuse.append(off_path)
    if s["launcher"] != "torchrun" and nproc != 1:
        refuse.append(f"launcher direct runs one process per host, but {nproc} are wanted "
                      f"(this host has {gpu_count} GPUs): use nccl_validate_launcher: torchrun")
    keep = []
    if (settings["cdi_device"] or runtime == "host") and not check_mode:
        # The job's NCCL settings, for the judge's comparison with what the worker applied.
        keep.append(kept(settings["results"], "nccl_intended.json", conf.get("settings") or {}))
    return {"members": members, "own": list(own_address(s["address"], probe, s.get("env"))),
            "settings": settings, "refuse": refuse,
            "rendezvous": {"members": members, "master_addr": s["master_addr"] or "",
                           "host": s["host"], "refuse": refuse},
            "keep": keep,
            "port_problem": (probe.get("rendezvous_port") or {}).get("problem") or ""}


# --- the job's path: the NCCL settings a job's container gets, and nothing else ------------------

# The launch's own NCCL settings: its log, for the proof (worker_env). A job's NCCL_DEBUG from
# nccl.conf differing there says nothing about the job's path.
LAUNCH_OWN = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"})
JOB_PATH_OPT_IN = "nccl_validate_job_path: false"


def job_path_differences(env, conf):
    """[(name, validate's value, the job's value or None)]: the NCCL_* settings of ``env`` (what
    validate adds to the worker's environment: nccl_validate_env) that a job's container does
    not get with that value from ``conf`` (its nccl.conf's settings, NAME -> value; NCCL takes
    the environment over the file, so each of these would make the proof another path). The
    launch's own log settings (LAUNCH_OWN) are left out; names not NCCL_* are not NCCL's."""
    out = []
    for name in sorted(env or {}, key=str):
        if not str(name).startswith("NCCL_") or name in LAUNCH_OWN:
            continue
        want, have = str((env or {})[name]), (conf or {}).get(name)
        if have is None or str(have) != want:
            out.append((str(name), want, None if have is None else str(have)))
    return out


def job_path_line(differences, job_side):
    """One line refusing a run whose worker would not get the job's NCCL settings: each
    difference (job_path_differences) with both values, validate's from nccl_validate_env
    and the job's as ``job_side(name, value or None)`` says it (the value and where it comes
    from); '' when none."""
    if not differences:
        return ""
    said = [f"nccl_validate_env sets {name}={want}, a job's container gets {job_side(name, have)}"
            for name, want, have in differences]
    return ("not the job's path: " + "; ".join(said) + ": declare the setting for nccl_env "
            "(nccl_env_socket_ifname, nccl_env_extra) and leave it out of nccl_validate_env, "
            f"or set {JOB_PATH_OPT_IN} to run off the job's path (never a PASS)")


def host_job_side(conf_path):
    """job_path_line's ``job_side`` for a host's own nccl.conf, as read there."""
    def side(name, have):
        return (f"{name}={have} from {conf_path}" if have is not None
                else f"no {name} from {conf_path}")
    return side


# --- where the rendezvous is ------------------------------------------------------------------

def is_ip(text):
    try:
        ipaddress.ip_address(str(text))
    except ValueError:
        return False
    return True


def ifname_matches(spec, names):
    """Interfaces NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME name, in NCCL's syntax: comma-separated
    prefixes, '=' for exact names, a leading '^' excludes the listed ones."""
    spec = (spec or "").strip()
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    spec = spec.lstrip("=")
    wanted = [w.strip() for w in spec.split(",") if w.strip()]
    if not wanted:
        return []

    def hit(name):
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [n for n in names if hit(n) != exclude and n != "lo"]


def own_address(ansible_host, probe, env):
    """The address the other hosts reach this host on when it is the rendezvous host, and how it
    was found: (address or None, where from). In order: ansible_host when it is an IP address;
    the host's address on the interface NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME names (the
    fabric); the address the SSH connection reached it on (SSH_CONNECTION's 3rd field). Never
    a name: a name that resolves on the controller may not resolve on the hosts."""
    if ansible_host and is_ip(ansible_host):
        return str(ansible_host), "ansible_host"
    addresses = (probe or {}).get("addresses") or {}
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        spec = (env or {}).get(var)
        if spec:
            for name in ifname_matches(spec, sorted(addresses)):
                if addresses[name]:
                    return addresses[name][0], f"{name} ({var})"
    ssh = (probe or {}).get("ssh_server_addr")
    if ssh and is_ip(ssh) and not ipaddress.ip_address(ssh).is_loopback:
        return ssh, "SSH connection"
    return None, ("ansible_host is not an IP address, no interface named by NCCL_SOCKET_IFNAME/"
                  "GLOO_SOCKET_IFNAME has one, and the connection is not SSH")


def rendezvous_address(members, master_addr, master_vars):
    """The address every member of a run dials: 127.0.0.1 for a single host, an explicit
    nccl_validate_master_addr, else the master's own address (own_address). ``master_vars``:
    the master's {'name', 'own_addr', 'own_addr_from'}. Raises ValueError with one line when
    no usable address is known."""
    if len(members) == 1:
        return "127.0.0.1"
    if master_addr:
        return str(master_addr)
    if master_vars.get("own_addr"):
        return str(master_vars["own_addr"])
    raise ValueError(f"no rendezvous address for {master_vars.get('name')}: "
                     f"{master_vars.get('own_addr_from')}; set nccl_validate_master_addr")


def rendezvous_of(members, master_addr, own):
    """{'addr': address or '', 'error': '' or one line}: the address every member of the run
    dials. ``own``: the rendezvous host's (members[0]) [address, where from] from its plan, or
    None when its preflight did not run."""
    own = own or [None, "its preflight did not run"]
    try:
        addr = rendezvous_address(members, master_addr, {"name": members[0], "own_addr": own[0],
                                                         "own_addr_from": own[1]})
    except ValueError as exc:
        return {"addr": "", "error": str(exc)}
    return {"addr": addr, "error": ""}


def rendezvous_port_problem(port, holders, remote_dir):
    """Why the rendezvous host cannot listen on ``port``, or '': another program listens there
    (torchrun's store would fail with EADDRINUSE seconds into the launch, in torch's words).
    ``holders``: module_utils/firewall_probe.port_holders. A launch of an earlier, interrupted
    run of ours (its argv runs ``remote_dir``/bin/worker.py) is not one: the run removes it."""
    ours = f"{remote_dir}/bin/worker.py"
    others = [h for h in holders or [] if ours not in (h.get("cmdline") or "")]
    if not others:
        return ""
    who = "; ".join(
        f"{h.get('name') or '?'} (pid {h['pid']}: {_clip(h.get('cmdline') or '', 80)})"
        if h.get("pid") else "a process this user cannot see" for h in others)
    return (f"the rendezvous port {port} is already in use on this host by {who}: stop it, "
            "or set nccl_validate_master_port to a free port (and open that one: "
            "firewall_rendezvous_ports)")


def rendezvous_addr_problem(route, host):
    """Why the rendezvous host ``host`` cannot be reached at the rendezvous address, or '':
    ``route`` is the probe's route on that very host (nccl_validate_probe: the address the name
    resolved to and the source address the kernel picks towards it). The store listens on this
    host and its peers connect to the address, so it must be one of the host's own: the kernel
    sources a packet to a local address from that address. Else every peer would wait the whole
    rendezvous timeout for an answer that cannot come."""
    addr, source = route.get("address"), route.get("source")
    if route.get("error") or not addr or not source or addr == source:
        return ""
    return (f"not an address of {host}, the rendezvous host, which listens on it (from here it "
            f"is another host, reached from {source}): set nccl_validate_master_addr to an "
            f"address {host} holds, or leave it unset")


def _clip(text, width):
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + "…"


# --- the host's rdma-core, mounted into an image that lacks it ---------------------------------

def host_rdma_mounts(rdma):
    """Read-only engine volumes for the host's rdma-core userspace, from the probe's ``rdma``
    section ({'libs': {name: path}, 'providers': dir or None, 'config': dir or None}). Each
    path is mounted where it sits on the host: the image's loader finds it on the same
    multiarch path, and the providers dir is where libibverbs looks for its drivers."""
    rdma = rdma or {}
    paths = [p for p in (rdma.get("libs") or {}).values() if p]
    paths += [p for p in (rdma.get("providers"), rdma.get("config")) if p]
    return [f"-v={p}:{p}:ro" for p in paths]


def host_rdma_decision(mode, image_has_verbs, rdma):
    """Mount the host's rdma-core? (mounts, why): always / never / auto (when the image cannot
    load libibverbs.so.1 and the host has it)."""
    if mode not in ("auto", "always", "never"):
        raise ValueError(f"nccl_validate_host_rdma must be auto, always or never, not {mode!r}")
    has = bool((rdma or {}).get("libs", {}).get("libibverbs.so.1"))
    if mode == "never":
        return [], "nccl_validate_host_rdma is never"
    if mode == "always" or (not image_has_verbs and has):
        if not has:
            raise ValueError("nccl_validate_host_rdma is always, but this host has no "
                             "libibverbs.so.1 to mount")
        return host_rdma_mounts(rdma), ("asked for" if mode == "always"
                                        else "the image has no libibverbs.so.1")
    return [], ("the image loads libibverbs.so.1" if image_has_verbs
                else "neither the image nor the host has libibverbs.so.1")


# --- the argv ---------------------------------------------------------------------------------

def _s(value):
    return str(value)


def worker_env(s, label):
    """The environment of the worker: NCCL's log, the auto-detected interface, PYTHONPATH, the
    launch's own needs (USE_LIBUV=0 for a torch built without libuv), then the user's env."""
    env = {"NCCL_DEBUG": _s(s["nccl_debug"]), "NCCL_DEBUG_SUBSYS": _s(s["nccl_debug_subsys"]),
           "PYTHONUNBUFFERED": "1", "RDMAPROV_VALIDATE_RUN": _s(label),
           "RDMAPROV_WORKER_RC_DIR": f"{s['remote_dir']}/{label}"}
    env.update({k: _s(v) for k, v in (s.get("auto_env") or {}).items()})
    if s.get("pythonpath"):
        env["PYTHONPATH"] = ":".join(s["pythonpath"])
    if s.get("launcher") == "torchrun" and s.get("torch_libuv") is False:
        # torchrun's static rendezvous asks for a libuv TCPStore; a distribution torch built
        # without libuv (Debian 13's python3-torch) refuses it unless told not to.
        env["USE_LIBUV"] = "0"
    env.update({k: _s(v) for k, v in (s.get("env") or {}).items()})
    return env


def container_prefix(s, label, env):
    """The engine's `run` argv up to and including the image, or [] for the host runtime.
    What RDMA in a container needs and nothing more (never --privileged): the host's network
    and IPC, the RDMA CDI device (``cdi_device``: a job's path, verbs nodes and the host's
    nccl.conf) or else the verbs devices one by one with IPC_LOCK, locked memory, the GPUs,
    the worker's directory."""
    if s["runtime"] == "host":
        return []
    engine = s["engine"]
    if engine not in ("docker", "podman"):
        raise ValueError(f"no container engine on this host ({engine})")
    cdi = s.get("cdi_device") or ""
    argv = [engine, "run", "--rm", "--name", f"rdmaprov-validate-{label}", "--pull", "never",
            "--network", "host", "--ipc", "host"]
    if not cdi:
        argv += ["--cap-add", "IPC_LOCK"]
    if s["memlock"] == "unlimited":
        argv += ["--ulimit", "memlock=-1:-1"]
    elif engine == "podman":
        argv += ["--ulimit", "host"]  # docker has no such value: its default is the daemon's
    argv += ["-v", f"{s['remote_dir']}:{s['remote_dir']}"]
    argv += [f"-v={p}:{p}:ro" for p in s.get("pythonpath") or []]
    argv += list(s.get("rdma_mounts") or [])
    if cdi:
        # The job's path: the RDMA CDI device gives the verbs nodes, rdma_cm and the host's
        # /etc/nccl.conf (container_runtime's spec); nothing is added by hand.
        argv += ["--device", cdi]
    else:
        argv += [f"--device={d}" for d in s.get("devices") or []]
    gpus = s.get("gpus", "auto")
    if gpus == "all" or (gpus == "auto" and int(s.get("gpu_count") or 0) > 0):
        # docker: the NVIDIA runtime's --gpus; podman: the CDI spec nvidia-ctk generates.
        argv += ["--gpus", "all"] if engine == "docker" else ["--device", "nvidia.com/gpu=all"]
    # Values stay out of argv (and argv.txt): the engine takes each from its own environment.
    argv += [f"--env={k}" for k in env]
    argv += [_s(a) for a in s.get("container_args") or []]
    return argv + [s["image"]]


def worker_argv(s, members, host, master, port):
    """torchrun multi-node (static rendezvous: every host knows its node rank, no etcd) or one
    process per host with explicit rank and world size."""
    if host not in members:
        raise ValueError(f"{host} is not a member of this run ({', '.join(members)})")
    rank, nnodes = members.index(host), len(members)
    worker = f"{s['remote_dir']}/bin/worker.py"
    timeout = int(s["rendezvous_timeout"])
    if s["launcher"] == "torchrun":
        argv = [s["python"], "-m", "torch.distributed.run", f"--nnodes={nnodes}",
                f"--node-rank={rank}", f"--nproc-per-node={int(s['nproc'])}",
                f"--master-addr={master}", f"--master-port={int(port)}", "--max-restarts=0",
                f"--rdzv-conf=timeout={timeout}", worker]
    elif s["launcher"] == "direct":
        if int(s["nproc"]) != 1:
            raise ValueError(f"launcher direct runs one process per host, but {s['nproc']} are "
                             "wanted: use nccl_validate_launcher: torchrun")
        argv = [s["python"], worker, "--rank", str(rank), "--world-size", str(nnodes),
                "--master-addr", str(master), "--master-port", str(int(port))]
    else:
        raise ValueError("nccl_validate_launcher must be torchrun or direct, not "
                         f"{s['launcher']!r}")
    return argv + ["--backend", s["backend"], "--timeout", str(timeout)] + pair_args(s) + [
        _s(a) for a in s.get("worker_args") or []]


def pair_args(s):
    """The worker's pair rounds after the fabric sweep (rdmaprov/validate/rounds.py): none
    unless nccl_validate_pairs asks for them; flags and defaults from ranges.VALIDATE."""
    # 0: the worker's own default (rounds.DEFAULT_MAX_JITTER); else a ratio p99/p50 >= 1.
    jitter = float(s.get("max_jitter") or 0)
    if 0 < jitter < 1:
        raise ValueError("nccl_validate_max_jitter must be 0 (the default) or a ratio p99/p50 "
                         "of 1 or more, not %r" % s["max_jitter"])
    return ranges.worker_flags(s)


def rail_args(s, run_dir):
    """The worker's rail round (ib_write_bw per rail-aligned HCA pair, rounds.rail_plan) into
    RUN_DIR/rails, which the role fetches to RESULTS/rails/<host>: with nccl_validate_rails
    auto (the role's default); none when absent (a launch that does not fetch rails) or never."""
    mode = _s(s.get("rails") or "never")
    if mode not in ("auto", "never"):
        raise ValueError("nccl_validate_rails must be auto or never, not %r" % mode)
    if mode == "never":
        return []
    return ["--rails-dir", f"{run_dir}/rails"] + (["--rail-cuda"] if s.get("rail_cuda") else [])


def launch(s, label, members, host, master, port):
    """Everything the role needs to start this host's part of one run:
    {'argv', 'env', 'dir', 'container', 'rank', 'nnodes'}. ``s``: the role's settings (keys
    without the nccl_validate_ prefix, plus what the probe and image preflight found:
    engine, gpu_count, devices, auto_env, rdma_mounts, torch_libuv)."""
    run_dir = f"{s['remote_dir']}/{label}"
    bin_dir = f"{s['remote_dir']}/bin"
    env = worker_env(s, label)
    py = shlex.quote(_s(s["python"]))
    # Inside the container (or on the host): port counters, the worker, the counters again.
    # torchrun exits 1 whatever its worker's code: a worker's own 2 or 3 (worker-rc.RANK) wins.
    inner = ["sh", "-c", 'cd "$0" && b=$1 && shift; py=' + py
             + '; "$py" "$b/rdma_ports.py" >counters_before.json 2>/dev/null; "$@";'
             + ' rc=$?; for f in worker-rc.*; do [ -f "$f" ] || continue; c=$(cat "$f");'
             + ' case $c in 2|3) [ $rc = 0 ] || rc=$c ;; esac; done;'
             + ' "$py" "$b/rdma_ports.py" >counters_after.json 2>/dev/null;'
             + ' exit $rc', run_dir, bin_dir, *worker_argv(s, members, host, master, port),
             *rail_args(s, run_dir)]
    prefix = container_prefix(s, label, env)
    return {"argv": prefix + inner, "env": env, "dir": run_dir,
            "container": f"rdmaprov-validate-{label}" if prefix else None,
            "rank": members.index(host), "nnodes": len(members)}


# The launch's shell: in the run directory ($0) it writes the argv (argv.txt), a fresh
# worker.log and the launch's start (steps.log), runs the argv under timeout ($1: the run's
# nccl_validate_timeout; exit 124 kept for the report) with job.pid, which lets a peer's failure
# stop it early, then records its exit (rc, steps.log) and prints it last: the wait reads it
# from the async result. worker.log is opened for appending, so that a line the stop adds is
# not overwritten by the worker's own stream. Values are its arguments, never its text.
START_SCRIPT = (
    'cd "$0" && t=$1 && shift && printf \'%s\\n\' "$@" > argv.txt && : > worker.log && '
    'echo "$(date +%s.%N) launch start" >> steps.log && '
    '{ timeout -k 15 "$t" "$@" >result.json 2>>worker.log & echo $! > job.pid; wait $!; '
    'rc=$?; echo $rc > rc; echo "$(date +%s.%N) launch exit $rc" >> steps.log; echo $rc; }')

# A peer could not run: the stop line ($1, the worker's own JSON form) goes into worker.log of
# the run directory ($0), then the launch gets SIGTERM.
STOP_SCRIPT = 'cd "$0" && printf \'%s\\n\' "$1" >> worker.log && kill -TERM "$(cat job.pid)"'

# What the role fetches of a part from its run directory (and STEPS_FILE, last), beside the rail
# round's outputs.
FETCHED = ("rc", "result.json", "worker.log", "counters_before.json", "counters_after.json",
           "argv.txt")
# Names the worker writes into rails/ (<hca>.port<N>.round<R>.log, ...server, skipped):
# nothing else is copied onto the controller.
RAIL_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.]{0,127}$")


def run_plan(s, launch, master):
    """What the role does around one launch (``launch``: launch()'s dict) of the run ``s``
    (the preflight's settings, plan()'s keys): {'start': the argv that starts it on the host
    (START_SCRIPT); 'wait': seconds the launch may take with its grace (nccl_validate_timeout
    + 60); 'poll'; 'members'; 'exits': the run's exit codes on the controller; 'local': this
    host's result directory there; 'label' and 'timeout', for the part's outcome;
    'rails_local': where the rail round's outputs go, '' without one; 'host_paths' and
    'controller_paths': [{path, state}] that make a fresh result directory on the host and
    clear an earlier run's on the controller; 'rm_killed': the engine's argv that removes the
    container of a killed run after the wait, [] without a container; 'keep': run.json on the
    controller (kept()), written by the rendezvous host only}."""
    label, host, members = s["label"], s["host"], s["members"]
    results = f"{s['results_dir']}/{label}"
    rails = f"{s['results_dir']}/rails/{host}" if s.get("rails") == "auto" else ""
    exits = f"{results}/.exits"
    container, engine = launch.get("container"), s.get("engine")
    controller = [{"path": s["results"], "state": "directory"},
                  {"path": f"{exits}/{host}", "state": "absent"}]
    if rails:
        controller.append({"path": rails, "state": "absent"})
    keep = []
    if host == members[0]:
        keep.append(kept(results, "run.json", {
            "label": label, "hosts": members, "master": members[0], "master_addr": master,
            "master_port": int(s["master_port"]), "runtime": s["runtime"],
            "image": s["image"] if s["runtime"] == "container" else None,
            "launcher": s["launcher"], "backend": s["backend"],
            "nproc_per_node": int(s["nproc"])}))
    return {
        "start": ["/bin/sh", "-c", START_SCRIPT, launch["dir"], str(int(s["timeout"])),
                  *[_s(a) for a in launch["argv"]]],
        "label": label, "timeout": int(s["timeout"]),
        "wait": int(s["timeout"]) + 60, "poll": int(s["poll_interval"]), "members": members,
        "exits": exits, "local": s["results"], "rails_local": rails,
        "host_paths": [{"path": launch["dir"], "state": "absent"},
                       {"path": launch["dir"], "state": "directory"}],
        "controller_paths": controller,
        "rm_killed": [engine, "rm", "--force", container] if container else [],
        "keep": keep}


def _directory(path, dry):
    """Make ``path`` and its missing parents, each 0755 (the file module's state directory
    with mode 0755). True when something was made or its mode changed."""
    made = []
    head = path
    while head and not os.path.isdir(head):
        made.append(head)
        head = os.path.dirname(head.rstrip("/")) or head
        if head == made[-1]:
            break
    if dry:
        return bool(made) or (os.stat(path).st_mode & 0o7777) != 0o755
    for d in reversed(made):
        os.mkdir(d)
        os.chmod(d, 0o755)
    if (os.stat(path).st_mode & 0o7777) != 0o755:
        os.chmod(path, 0o755)
        return True
    return bool(made)


def keep_results(paths=(), files=(), dry=False):
    """The role's result directories and files on the controller (the nccl_validate_results
    action): ``paths`` [{path, state}], each made a directory (0755, with its parents) or
    removed (absent), in order; then ``files`` [{dir, dest, content}] (kept()), each written
    0644 into its directory when its content differs. ``dry`` (check mode): nothing is
    touched. Returns whether a file or a file's directory changed (the paths, which only
    reset an earlier run's, do not count)."""
    for p in paths:
        path = p["path"]
        if p["state"] == "directory":
            _directory(path, dry)
        elif p["state"] == "absent":
            if dry or not os.path.lexists(path):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        else:
            raise ValueError(f"a result path's state is directory or absent, not {p['state']!r}")
    changed = False
    for f in files:
        dest, content = f["dest"], f["content"]
        changed |= _directory(f["dir"], dry)
        try:
            with open(dest, encoding="utf-8", newline="") as fh:
                same = fh.read() == content
            mode_ok = (os.stat(dest).st_mode & 0o7777) == 0o644
        except (OSError, UnicodeDecodeError):
            same = mode_ok = False
        if same and mode_ok:
            continue
        changed = True
        if dry:
            continue
        if not same:
            tmp = f"{dest}.rdmaprov-tmp"
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                fh.write(content)
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        else:
            os.chmod(dest, 0o644)
    return changed


def stop_argv(run_dir, host, reason):
    """The argv that stops this host's part of a run when a peer could not run: the worker's
    one-line JSON error (stop_reason's line) into worker.log, then SIGTERM to the launch."""
    line = json.dumps({"schema": "rdmaprov.validate.worker/1", "ok": False, "hostname": host,
                       "error": reason})
    return ["/bin/sh", "-c", STOP_SCRIPT, run_dir, line]


def fetched(run_dir, local, rails_local, rail_names):
    """[{src, dest}]: what the role copies of a part onto the controller: the run's files
    (FETCHED) and, with a rail round (``rails_local``), the outputs in RUN_DIR/rails whose
    names the worker writes (RAIL_FILE; ``rail_names``: what is there)."""
    out = [{"src": f"{run_dir}/{name}", "dest": f"{local}/{name}"}
           for name in (*FETCHED, STEPS_FILE)]
    if rails_local:
        out += [{"src": f"{run_dir}/rails/{name}", "dest": f"{rails_local}/{name}"}
                for name in sorted(rail_names) if RAIL_FILE.match(name)]
    return out


def leftovers(s):
    """The engine's argvs that remove what an earlier, interrupted run of ours left on a podman
    host, before the image preflight: its preflight's container and its run's (docker's --rm
    removes its own)."""
    if s["runtime"] != "container" or s["engine"] != "podman":
        return []
    return [[s["engine"], "rm", "--force", "--ignore", f"rdmaprov-validate-{s['label']}{tail}"]
            for tail in ("-preflight", "")]


def preflight_argv(s, label):
    """The image preflight: the worker's --preflight in the same container (or on the host) the
    run will use, so what it finds (libibverbs, providers, torch, libuv) is what the run gets."""
    env = worker_env(s, label)
    inner = [_s(s["python"]), f"{s['remote_dir']}/bin/worker.py", "--preflight",
             "--backend", s["backend"]]
    # Bounded like any phase of the run: an image that hangs (a stuck mount, a torch import
    # that never returns) fails its host within the rendezvous timeout.
    bound = ["timeout", "-k", "10", str(int(s["rendezvous_timeout"]))]
    return {"argv": bound + container_prefix(s, f"{label}-preflight", env) + inner, "env": env}


def preflight_failure(doc, require_ib):
    """One line saying why this host cannot run, from the worker's --preflight document, or ''.
    A host without any HCA is not failed here: the run then shows NCCL's Socket fallback."""
    if not isinstance(doc, dict):
        return "image preflight printed no JSON document"
    torch = doc.get("torch") or {}
    if torch.get("error"):
        return f"torch is not importable: {torch['error']}"
    if doc.get("backend") == "nccl" and torch.get("cuda_devices") == 0:
        return "backend nccl, but torch sees no CUDA device"
    pf = doc.get("preflight") or {}
    hcas = pf.get("hcas") or []
    if require_ib and hcas:
        if not pf.get("libibverbs"):
            return (f"{len(hcas)} HCA(s) ({', '.join(hcas)}) but libibverbs.so.1 does not load "
                    "(use an image with rdma-core, or nccl_validate_host_rdma: always)")
        found = pf.get("verbs_devices")
        if found is not None and found < len(hcas):
            return (f"libibverbs lists {found} of {len(hcas)} HCA(s) ({', '.join(hcas)}): no "
                    "provider for the others (rdma-core's providers dir or /etc/libibverbs.d "
                    "missing in the image)")
    return ""


def require_ib(backend, require, env):
    """Is IB required of this run (nccl_validate_require_ib)? always / never / auto: backend
    nccl, unless NCCL_IB_DISABLE turns IB off (a socket comparison run)."""
    if require not in ("auto", "always", "never"):
        raise ValueError(f"nccl_validate_require_ib must be auto, always or never, not {require!r}")
    if require != "auto":
        return require == "always"
    return backend == "nccl" and str((env or {}).get("NCCL_IB_DISABLE", "0")) in ("", "0")


def refusal(rendezvous_error, refuse):
    """The one line that stops this host before anything is kept or run, or '': the rendezvous
    step's, then plan()'s refusals in their order."""
    return rendezvous_error or next(iter(refuse or []), "")


# --- the image on the host (module nccl_validate_preflight, step image) ------------------------

def image_step(s, run):
    """The container runtime's image on this host, pulled when absent before anything is timed
    (nccl_validate_pull missing; never: it must be there), through ``run(argv) -> (rc, stdout,
    stderr)``. ``s``: the plan's settings. {'changed': whether a pull ran, 'failure': '' or
    the one line saying why the image is not there}. The host runtime needs none."""
    if s["runtime"] != "container":
        return {"changed": False, "failure": ""}
    engine, image = s["engine"], s["image"]
    rc, _out, _err = run([engine, "image", "inspect", image])
    if rc == 0:
        return {"changed": False, "failure": ""}
    if s["pull"] == "never":
        return {"changed": False,
                "failure": f"image {image}: not on this host and nccl_validate_pull is never"}
    rc, _out, err = run(["timeout", str(s["pull_timeout"]), engine, "pull", image])
    if rc == 0:
        return {"changed": True, "failure": ""}
    if rc == 124:
        why = f"pull timed out after {s['pull_timeout']}s"
    else:
        said = [line for line in (err or "").splitlines() if line]
        why = f"pull failed: {said[-1] if said else 'no message'}"
    return {"changed": True, "failure": f"image {image}: not on this host and {why}"}


# --- the image preflight (module nccl_validate_preflight) -------------------------------------

def preflight_document(text):
    """The worker's --preflight document (a dict), or None when the text is not one."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def image_preflight(s, run):
    """One host's image preflight: the worker's --preflight in the container (or on the host)
    the run will use, through ``run(argv, env) -> (rc, stdout, stderr)``; in a container whose
    image cannot load libibverbs.so.1, once more with the host's rdma-core mounted
    (nccl_validate_host_rdma, host_rdma_decision). ``s``: the plan's settings (plan()).
    Returns {'document': the last run's output, 'exit_code', 'failure': why this host cannot
    run or '', 'host_rdma': {'mounts', 'why'}, 'settings': ``s`` with what the launch takes
    from the preflight (rdma_mounts, torch_libuv)}; no 'rc', which would fail the module's
    task."""
    pf = preflight_argv(s, s["label"])
    rc, out, err = run(pf["argv"], pf["env"])
    mounts, why, failure = [], "", ""
    if s["runtime"] == "container" and rc == 0:
        doc = preflight_document(out.strip() or "{}")
        if doc is not None:
            verbs = (doc.get("preflight") or {}).get("libibverbs") is not None
            try:
                mounts, why = host_rdma_decision(s["host_rdma"], verbs, s.get("rdma"))
            except ValueError as exc:
                failure = str(exc)
            if mounts:
                pf = preflight_argv({**s, "rdma_mounts": mounts}, s["label"])
                rc, out, err = run(pf["argv"], pf["env"])
    text = (out or "").strip()
    if rc != 0 and not failure:
        said = [line for line in (err or "").splitlines() if line]
        failure = f"image preflight failed (rc {rc}): {said[-1] if said else 'no message'}"
    failure = failure or preflight_failure(preflight_document(text), s["require_ib"])
    torch = ((preflight_document(text or "{}") if rc == 0 else None) or {}).get("torch")
    libuv = torch.get("libuv") if isinstance(torch, dict) else None
    return {"document": text, "exit_code": rc, "failure": failure,
            "host_rdma": {"mounts": mounts, "why": why},
            "settings": {**s, "rdma_mounts": mounts, "torch_libuv": libuv}}


# --- the wait: stop waiting when a member could not run --------------------------------------

def exit_code(job):
    """The worker's exit code from a finished async job (the launch shell prints it last)."""
    if not job or not job.get("finished"):
        return None
    lines = [ln.strip() for ln in str(job.get("stdout") or "").splitlines() if ln.strip()]
    return int(lines[-1]) if lines and lines[-1].lstrip("-").isdigit() else None


def watch(job, exits_dir, host, members):
    """One poll of a member's wait, on the controller: once this host's job finished, record
    its exit code (a file per host under ``exits_dir``). True when the wait is over: the job
    finished, or a peer could not run (stop_reason)."""
    rc = exit_code(job)
    if rc is not None:
        os.makedirs(exits_dir, exist_ok=True)
        path = os.path.join(exits_dir, host)
        with open(path + ".tmp", "w") as fh:
            fh.write(f"{rc}\n")
        os.replace(path + ".tmp", path)
        return True
    return bool(stop_reason(exits_dir, host, members))


def stop_reason(exits_dir, host, members):
    """Why this host's part cannot succeed any more, or '': a peer that could not run
    (OWN_FAILURES) ends the run for everyone at once; a peer that failed in a collective
    (RC_FAILED) does not, its partners end on their own timeouts (so a hung host is named by
    its own watchdog, not hidden behind its partners' stop)."""
    for peer in members:
        if peer == host:
            continue
        try:
            with open(os.path.join(exits_dir, peer)) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.lstrip("-").isdigit() and int(text) in OWN_FAILURES:
            return f"stopped: {peer} could not run (its worker exited {text})"
    return ""


# --- what each part did last: steps.log, for a failure's reason --------------------------------

# One line per step, appended on the host in the run directory: "<unix time> <who> <what>", who
# "launch" (the role's launch shell: start, exit RC) or "rank<N>" (the worker: each phase it
# enters, as its watchdog sees them, then exit RC). Fetched with the results.
STEPS_FILE = "steps.log"


def _rank_key(who):
    tail = who[4:]
    return (0, int(tail)) if tail.isdecimal() else (1, who)


def steps_summary(text):
    """One clause from a host's steps.log saying where each part of its run got to, or '':
    each rank's last step and its own exit code, then the launch's exit, timed from the launch
    ("rank0: last step 'rendezvous at env://' at +3 s, exit 1 at +124 s; launch exit 1 at +125 s").
    A launch that exited 125-127 (the container engine's own failure, or a command that could
    not run) after every rank exited 0 is said first: the worker's result then stands whole."""
    start = launch_exit = None
    last, exits = {}, {}
    for at, who, what in steps_lines(text):
        code = what[5:].strip() if what.startswith("exit ") else None
        if who == "launch":
            if what == "start" and start is None:
                start = at
            elif code is not None:
                launch_exit = (at, code)
        elif who.startswith("rank"):
            if code is not None:
                exits[who] = (at, code)
            else:
                last[who] = (at, what)

    def when(at):
        return f" at +{at - start:.0f} s" if start is not None else ""

    out = []
    for who in sorted(set(last) | set(exits), key=_rank_key):
        bits = []
        if who in last:
            bits.append(f"last step '{last[who][1]}'{when(last[who][0])}")
        if who in exits:
            bits.append(f"exit {exits[who][1]}{when(exits[who][0])}")
        out.append(f"{who}: " + ", ".join(bits))
    if launch_exit is not None:
        out.append(f"launch exit {launch_exit[1]}{when(launch_exit[0])}")
    elif start is not None:
        out.append("the launch never exited (its host lost or the wait given up)")
    lead = ""
    if (launch_exit is not None and launch_exit[1] in ("125", "126", "127") and exits
            and all(step[1] == "0" for step in exits.values())):
        lead = (f"the launch exited {launch_exit[1]} after every rank exited 0 (the container "
                "engine's own failure, not the worker's); ")
    return lead + "; ".join(out) if out else ""


# --- a part that failed: one line, for the role's failure and the judge's verdict alike -------

KILLED = ("124", "137")  # timeout's exit status, and SIGKILL's after its grace
# The worker's own one-line errors (watchdog, stop), naming the cause when no NCCL error does.
_OWN = ("watchdog:", "stopped:")
_EXC = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)\b:?\s*(.*)$")
_ERRORISH = re.compile(r"error|fail|exception|fatal|abort|killed|segmentation|timed? ?out|"
                       r"refused|denied|unreachable|cannot|could not", re.I)
_LOG_HEAD = re.compile(r"[\w.-]+:\d+:\d+ \[\d*")  # NCCL's "host:pid:tid [dev]", maybe cut
_FRAME = re.compile(r"^(?:frame #\d+|#\d+\s|0x[0-9a-f]+|Exception raised from |"
                    r"File \"|Traceback |terminate called|\^+$|~+)")
# NCCL's and torch's own log chatter, which the line that names a failure is not.
_CHATTER = ("NCCL INFO", "NCCL WARN", " INFO ", " WARN ", "NCCL version", "[rank", "[W",
            "[I", "[E", "W0", "I0", "E0")


def _exception(lines):
    """The Python/C++ exception that ended the worker: a ``what():`` text or an ``XError: ...``
    line, never a stack frame printed after an abort."""
    for ln in lines:
        if ln.startswith("what():"):
            return ln[7:].strip()
    found = None
    for ln in lines:
        if _FRAME.match(ln):
            continue
        m = _EXC.match(ln)
        if m and m.group(1):
            found = ln
    return found


def failure_reason(rc, log, own=None, watchdog=None, timeout=None):
    """Why a host's part of a run failed, in one line; None when it exited 0. From its exit
    code (the launch's ``rc`` file) and worker.log: ``own``, the host's first NCCL error (the
    judge's parser gives it; the role on a host has none), leads; then the worker's and the
    launch's one-line JSON errors (``watchdog:``: the worker hung and was killed; ``stopped:``:
    a peer could not run), then the exception that ended it, then the last line that says an
    error and is not NCCL's or torch's chatter; ``watchdog``, torch's watchdog as the parser
    read it, when nothing else names the cause."""
    rc = (rc or "").strip()
    if rc == "0":
        return None
    lead = f"{own}; " if own else ""
    lines = [ln.strip() for ln in (log or "").splitlines() if ln.strip()]
    errors = []
    for ln in lines:
        if ln.startswith("{") and '"error"' in ln:
            try:
                err = json.loads(ln).get("error")
            except (ValueError, AttributeError):
                continue
            if err:
                errors.append(str(err))
    why = next((e for e in errors if e.startswith(_OWN)), None)
    if not rc:
        return lead + "no exit status: the run did not finish on this host (connection lost?)"
    if rc in KILLED:
        limit = f" of {timeout}s" if timeout else ""
        return lead + (f"worker hung: killed at the run's timeout{limit} (a peer never joined, "
                       "or NCCL/gloo hung)" + (f": {why}" if why else "")
                       + ("" if lines else "; its log is empty"))
    if why:
        return f"{lead}{why} (rc {rc})"
    plain = [ln for ln in lines if not ln.startswith("{")]
    last = _exception(plain)
    if last is None and not own:
        last = next((ln for ln in reversed(plain) if not any(c in ln for c in _CHATTER)
                     and not _FRAME.match(ln) and not _LOG_HEAD.search(ln[:80])
                     and _ERRORISH.search(ln)), None)
    wd = watchdog or {}
    if last is None and not errors and wd.get("count"):
        last = (f"torch's watchdog: collective {wd.get('op') or '?'} (SeqNum {wd.get('seq')}) "
                f"timed out on {wd['count']} rank(s)")
    tail = errors[-1] if errors else last
    if own:
        return f"{own} (rc {rc})" + (f"; then: {tail}" if tail else "")
    return f"worker failed (rc {rc}): {tail or 'no message'}"


def part_outcome(rc, log, steps, own=None, watchdog=None, timeout=None):
    """failure_reason, then where each rank got to and when, from steps.log (steps_summary)."""
    why = failure_reason(rc, log, own, watchdog, timeout)
    if why is None or not steps:
        return why
    where = steps_summary(steps)
    return f"{why} [{where}]" if where else why


def part_failure(label, rc, log, steps, timeout):
    """The role's one line for a host's part of run ``label`` that failed ('' when it exited
    0): the judge's reason (part_outcome) without the NCCL log's parse, which the control
    host adds."""
    why = part_outcome(rc, log, steps, timeout=timeout)
    return f"{label}: {why}" if why else ""


def steps_lines(text):
    """(time, who, what) of each well-formed steps.log line, in file order: the one reader of
    steps.log (rdmaprov/validate/run_times.py uses it too)."""
    out = []
    for line in (text or "").splitlines():
        parts = line.strip().split(" ", 2)
        if len(parts) < 3:
            continue
        try:
            at = float(parts[0])
        except ValueError:
            continue
        out.append((at, parts[1], parts[2].strip()))
    return out
