"""The host a lab runs on: root, the kernel's names (ip links, bridges), the subnets other labs
and this host's networks hold, the inotify cap that limits how many nodes can boot, and the
host-wide settings a node must not change."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from rdmaprov.errors import UserError

if TYPE_CHECKING:
    from rdmaprov.lab import LabState

# Host-wide settings a misbehaving node could change; checked after every `up`.
HOST_SENTINELS = ("/proc/sys/vm/swappiness", "/proc/sys/fs/protected_regular")


def root_tag(state_root: Path) -> str:
    """Three hex digits naming this filesystem root and state directory: two labs of one name
    started from different roots (a fresh chroot and the host) share the kernel's bridges and
    cgroups, so the names the kernel sees carry this tag."""
    root = os.stat("/")
    ident = f"{root.st_dev}:{root.st_ino}:{state_root.resolve()}"
    return hashlib.sha256(ident.encode()).hexdigest()[:3]


def require_root() -> None:
    if os.geteuid() != 0:
        raise UserError("the lab needs root (network namespaces, mounts): run it with sudo")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


# inotify instances a booted node's processes hold (systemd, journald, logind, dbus, sshd:
# 7 counted on a Debian 12 node), and the sysctl that caps them per user on the host.
INOTIFY_PER_NODE = 8
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")


def inotify_in_use(uid: int | None = None) -> int:
    """inotify instances held now by the processes of ``uid`` (default: this user)."""
    uid = os.getuid() if uid is None else uid
    count = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if proc.stat().st_uid != uid:
                continue
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) == "anon_inode:inotify":
                    count += 1
        except OSError:
            continue  # gone, or not ours to read
    return count


def check_inotify(new_nodes: int) -> None:
    """Refuse, in one line, to boot nodes the host's inotify cap would kill: a node's systemd
    that cannot get an inotify instance exits at once, with nothing on its console."""
    if new_nodes <= 0:
        return
    try:
        limit = int(INOTIFY_LIMIT.read_text())
    except (OSError, ValueError):
        return
    in_use = inotify_in_use()
    need = new_nodes * INOTIFY_PER_NODE
    if in_use + need > limit:
        raise UserError(
            f"{new_nodes} more lab nodes need about {need} inotify instances, and this host "
            f"allows {limit} per user with {in_use} in use (fs.inotify.max_user_instances): "
            f"raise it, e.g. sysctl -w fs.inotify.max_user_instances="
            f"{max(1024, in_use + need)}, or start fewer nodes")


def used_subnets(state_root: Path) -> set[str]:
    used: set[str] = set()
    if state_root.is_dir():
        for path in state_root.glob("*/state.json"):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            used.update(data.get(k) for k in ("subnet", "fabric_subnet") if data.get(k))
    return used

def host_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Networks this host already has an address in (other labs, real LANs)."""
    out = ip("-o", "-4", "addr", "show", check=False).stdout
    nets = []
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            nets.append(ipaddress.ip_interface(fields[fields.index("inet") + 1]).network)
    return nets

def pick_subnet(second: int, state_root: Path) -> str:
    """A free /24 under 10.SECOND.0.0/16: no other lab's and none this host has an address in."""
    used = used_subnets(state_root)
    taken = host_networks()
    for third in range(250, 150, -1):
        cand = f"10.{second}.{third}.0/24"
        net = ipaddress.ip_network(cand)
        if cand not in used and not any(net.overlaps(t) for t in taken):
            return cand
    raise UserError(f"no free lab subnet left under 10.{second}.0.0/16: remove old labs")


def host_sentinels() -> dict[str, str]:
    out = {p: Path(p).read_text().strip() for p in HOST_SENTINELS if Path(p).exists()}
    out["/dev/null"] = oct(os.stat("/dev/null").st_mode)
    return out

def bridges_up(state: LabState) -> None:
    """The management and fabric bridges, each with the gateway address of its subnet."""
    for bridge, subnet, mtu in ((state.bridge, state.subnet, state.mtu),
                                (state.fabric_bridge, state.fabric_subnet, state.fabric_mtu)):
        if not bridge:
            continue  # a lab made before the fabric network existed
        net = ipaddress.ip_network(subnet)
        gw = next(net.hosts())
        if ip("link", "show", bridge, check=False).returncode != 0:
            ip("link", "add", bridge, "type", "bridge")
        ip("link", "set", bridge, "mtu", str(mtu), "up")
        have = ip("-o", "-4", "addr", "show", "dev", bridge).stdout
        if f"{gw}/" not in have:
            ip("addr", "add", f"{gw}/{net.prefixlen}", "dev", bridge)
