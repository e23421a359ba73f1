# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Read-only probe of the firewall role (module firewall_probe): raw texts of the firewall tools,
the live rules, the listening sockets and Slurm's config; parsing and decisions are made on the
control host (plugins/module_utils/netcfg_firewall.py)."""
from __future__ import annotations

import os
import shutil
import subprocess

from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_firewall as nf
from ansible_collections.rdmaprov.cluster.plugins.module_utils import ssh_session

SLURM_CONFS = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/usr/local/etc/slurm.conf")


def run(argv):
    if not shutil.which(argv[0]):
        return {"rc": None, "stdout": "", "stderr": f"{argv[0]}: not installed"}
    proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "LC_ALL": "C"})
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def socket_owners():
    """Socket inode → name of a process holding it (what `ss -p` shows)."""
    owners = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        name = None
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                if name is None:
                    name = (read(f"/proc/{pid}/comm") or "?").strip()
                owners.setdefault(link[8:-1], name)
    return owners


def port_holders(port, proc_net=None):
    """The processes holding a TCP socket that listens on ``port`` (any address):
    [{pid, name, cmdline}], what a new listener there would fail on with EADDRINUSE.
    ``proc_net``: the /proc/net/tcp{,6} texts (read here when not given)."""
    if proc_net is None:
        proc_net = {k: read(f"/proc/net/{k}") or "" for k in ("tcp", "tcp6")}
    inodes = {sock["inode"] for kind in ("tcp", "tcp6")
              for sock in nf.parse_proc_net(kind, proc_net.get(kind, ""))
              if sock["port"] == int(port)}
    holders = []
    if not inodes:
        return holders
    for pid in sorted(filter(str.isdigit, os.listdir("/proc")), key=int):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                cmdline = (read(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()
                holders.append({"pid": int(pid), "name": (read(f"/proc/{pid}/comm") or "?").strip(),
                                "cmdline": cmdline})
                break
    if not holders:  # a socket of another user's process whose fds this user cannot read
        holders.append({"pid": None, "name": "?", "cmdline": ""})
    return holders


def nft_reference(ruleset, table, digest):
    """The rendered ruleset as this host's nft prints it back: loaded into a network namespace of
    its own (`unshare --net`, gone when nft exits; the host's tables are not touched), then
    listed. {rc, stdout, stderr, sha1}: sha1 names the ruleset it was made from; rc other than 0
    where it could not be made (no unshare, no privilege, a rule naming a device the empty
    namespace lacks), and the plan then reads the rendered text itself."""
    if not (shutil.which("unshare") and shutil.which("nft")):
        return {"rc": None, "stdout": "", "stderr": "unshare or nft: not installed", "sha1": digest}
    proc = subprocess.run(["unshare", "--net", "sh", "-c", 'nft -f - && nft list table inet "$1"',
                           "rdmaprov-firewall", table], input=ruleset, capture_output=True,
                          text=True, check=False, env={**os.environ, "LC_ALL": "C"})
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "sha1": digest}


def probe(table, policy):
    control_ip, _server_ip = ssh_session.endpoints()
    port_range = (read("/proc/sys/net/ipv4/ip_local_port_range") or "32768 60999").strip()
    ufw = run(["ufw", "status"])
    slurm_conf_path = next((p for p in SLURM_CONFS if os.path.isfile(p)), None)
    firewalld_active = run(["systemctl", "is-active", "firewalld"])["stdout"].strip() == "active"
    out = {
        "control_ip": control_ip,
        "firewalld_active": firewalld_active,
        "ufw_active": ufw["rc"] == 0 and "Status: active" in ufw["stdout"],
        "ufw_present": bool(shutil.which("ufw")),
        # The rules ufw keeps, active or not: which of the role's are missing.
        "ufw_added": run(["ufw", "show", "added"]) if shutil.which("ufw") else None,
        "nft_present": bool(shutil.which("nft")),
        "systemd_run": bool(shutil.which("systemd-run")),
        "local_port_range": port_range,
        # Text, not -j: nft 1.0.6's JSON leaves out the table comment that carries our hash.
        "nft_table": run(["nft", "list", "table", "inet", table]),
        "proc_net": {k: read(f"/proc/net/{k}") or "" for k in ("tcp", "tcp6", "udp", "udp6")},
        "socket_owners": socket_owners(),
        "slurm_conf_path": slurm_conf_path,
        "slurm_conf": read(slurm_conf_path) if slurm_conf_path else None,
        "slurm_installed": any(shutil.which(b) for b in ("slurmd", "slurmctld")),
    }
    if firewalld_active:
        out["firewalld_policy"] = {
            "permanent": run(["firewall-cmd", "--permanent", f"--policy={policy}",
                              "--list-rich-rules"]),
            "runtime": run(["firewall-cmd", f"--policy={policy}", "--list-rich-rules"]),
        }
    return out
