"""The lab: real Debian nodes on this machine, for tests and a newcomer's first run.

A node is a network namespace on two bridges, as a cluster host sits on two networks: eth0 on the
management network (SSH, Ansible; MTU 1500) and eth1 on the fabric (the data network that RDMA
and NCCL use; its "switch" takes jumbo frames, the node's port starts at 1500 as on a fresh host).
Each has a fixed MAC and no default route. A node also has an overlay root over a
shared debootstrapped base, and systemd as PID 1 in its own mount/PID/UTS/IPC/cgroup namespaces,
running sshd with its own host key. `Lab.up` writes an Ansible inventory for the nodes. Lab
traffic stays on the bridge: nodes have no route out and resolve names against 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib.resources import as_file, files
from pathlib import Path

from rdmaprov.errors import UserError
from rdmaprov.lab import base as lab_base
from rdmaprov.lab import host as lab_host
from rdmaprov.lab import inventory as lab_inventory
from rdmaprov.lab import netstack as lab_netstack
from rdmaprov.lab.host import ip as _ip

STATE_ROOT = Path(os.environ.get("RDMAPROV_LAB_DIR", "/var/lib/rdmaprov/lab"))
CGROUP_ROOT = (Path("/sys/fs/cgroup/unified")
               if Path("/sys/fs/cgroup/unified/cgroup.procs").exists() else Path("/sys/fs/cgroup"))
LAB_WORKER_IMAGE = lab_inventory.LAB_WORKER_IMAGE
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
# `lab exec`'s PATH: root's login PATH on a node (Debian's login.defs ENV_SUPATH), with
# /usr/local/bin, where the node_tool role puts rdmaprov.
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class Node:
    name: str
    index: int
    address: str
    mac: str
    fabric_address: str = ""
    fabric_mac: str = ""
    pid: int = 0


@dataclass
class LabState:
    name: str
    subnet: str
    bridge: str
    mtu: int = 1500
    fabric_subnet: str = ""
    fabric_bridge: str = ""
    fabric_mtu: int = 9000
    nodes: list[dict] = field(default_factory=list)
    # Where the nodes' overlay layers live (the lab dir, or /run when that is on overlayfs).
    nodes_dir: str = ""
    base: str = ""
    repo: str = ""
    # Tells this root's labs from another root's (a chroot on the same kernel) in the host-wide
    # names: bridges, veths, netns and cgroups. Empty for a lab made before it existed.
    tag: str = ""
    suite: str = ""
    # Which network stack owns the fabric interface (eth1) inside the nodes, and the cached
    # overlay layer that holds its packages (below each node's own layer, above the base).
    netstack: str = "none"
    layer: str = ""


def _net(given: str | None) -> str | None:
    """A subnet as the lab's state writes it (10.199.3.0/24), to compare; as given when it is
    not one (a new lab's check words that)."""
    if given is None:
        return None
    try:
        return str(ipaddress.ip_network(given, strict=True))
    except ValueError:
        return given


class Lab:
    def __init__(self, name: str = "lab") -> None:
        if not NAME_RE.match(name):
            raise UserError(
                f"lab name {name!r}: use 1-8 lowercase letters/digits, starting with a letter")
        self.name = name
        self.dir = STATE_ROOT / name
        self.state_file = self.dir / "state.json"
        self.key, self.inventory, self.known_hosts = (self.dir / f for f in lab_inventory.KEY_FILES)

    # ----- state ---------------------------------------------------------------------------
    def _load(self) -> LabState | None:
        if not self.state_file.is_file():
            return None
        return LabState(**json.loads(self.state_file.read_text()))

    def _save(self, state: LabState) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(self.state_file)

    def _nodes_dir(self, state: LabState) -> Path:
        if not state.nodes_dir:
            state.nodes_dir = str(lab_base.writable_layer_dir(self.dir / "nodes", self.name))
        return Path(state.nodes_dir)

    # Host-wide names. At most 15 characters for interfaces: r + tag(3) + name(8) + h|f + 1..64.
    def _netns(self, node: str, tag: str) -> str:
        return f"rdmaprov-{tag}-{self.name}-{node}" if tag else f"rdmaprov-{self.name}-{node}"

    def _veth(self, index: int, tag: str, fabric: bool = False) -> str:
        return f"r{tag}{self.name}{'f' if fabric else 'h'}{index}"

    @staticmethod
    def _cgroup_parent(tag: str) -> Path:
        return CGROUP_ROOT / (f"rdmaprov-lab-{tag}" if tag else "rdmaprov-lab")

    def _cgroup(self, node: str, tag: str) -> Path:
        return self._cgroup_parent(tag) / f"{self.name}-{node}"

    # ----- up ------------------------------------------------------------------------------
    def up(self, nodes: int = 3, subnet: str | None = None, mirror: str | None = None,
           suite: str | None = None, mtu: int | None = None, fabric_subnet: str | None = None,
           fabric_mtu: int | None = None, netstack: str | None = None,
           log: Callable[[str], object] = print) -> LabState:
        """Start the lab (or the nodes it lacks). A setting given for a lab already up must be
        the one it runs (else one line: it would be dropped); not given: the lab's own, or for a
        new lab the defaults (eth0 1500, fabric 9000, free subnets)."""
        lab_host.require_root()
        if not 1 <= nodes <= 64:
            raise UserError(f"--nodes {nodes}: a lab has 1 to 64 nodes")
        if netstack is not None and netstack not in lab_netstack.NETSTACKS:
            raise UserError(
                f"--netstack {netstack}: use one of {', '.join(lab_netstack.NETSTACKS)}")
        if suite is not None and not NAME_RE.match(suite):
            raise UserError(f"--suite {suite!r}: a distribution codename such as bookworm")
        state = self._load()
        if state is not None:
            for flag, given, have in (("--netstack", netstack, state.netstack),
                                      ("--suite", suite, state.suite),
                                      ("--mtu", mtu, state.mtu),
                                      ("--fabric-mtu", fabric_mtu, state.fabric_mtu),
                                      ("--subnet", _net(subnet), state.subnet),
                                      ("--fabric-subnet", _net(fabric_subnet),
                                       state.fabric_subnet)):
                if given is not None and have and given != have:
                    raise UserError(
                        f"lab {self.name!r} runs {flag} {have}; run 'rdmaprov lab down --name "
                        f"{self.name}' first to change it")
        mtu = 1500 if mtu is None else mtu
        fabric_mtu = 9000 if fabric_mtu is None else fabric_mtu
        if state is None:
            for value, flag in ((mtu, "--mtu"), (fabric_mtu, "--fabric-mtu")):
                if not 1280 <= value <= 9216:
                    raise UserError(f"{flag} {value}: use 1280..9216")
        elif len(state.nodes) > nodes:
            raise UserError(
                f"lab {self.name!r} has {len(state.nodes)} nodes; run 'rdmaprov lab down "
                f"--name {self.name}' first to shrink it"
            )
        distro = lab_base.Distro(suite=suite or (state and state.suite) or lab_base.host_suite(),
                                 mirror=mirror or lab_base.host_mirror())
        if state is None:
            state = self._new_state(nodes, subnet, fabric_subnet, mtu, fabric_mtu,
                                    netstack or "none")
        state.suite = distro.suite
        started = time.monotonic()
        log(f"base image {distro.key} (cached in {lab_base.CACHE_DIR})")
        base = lab_base.ensure_base(distro, self.dir / "build.log")
        repo = lab_base.ensure_repo(distro, base, self.dir / "build.log")
        layer = lab_base.ensure_netstack_layer(distro, base, repo, state.netstack,
                                               self.dir / "build.log")
        state.base, state.repo, state.layer = str(base), str(repo), str(layer or "")
        sentinels = lab_host.host_sentinels()
        if not self.key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "",
                            "-C", f"rdmaprov-lab-{self.name}", "-f", str(self.key)], check=True)
        lab_host.bridges_up(state)
        net = ipaddress.ip_network(state.subnet)
        hosts = list(net.hosts())
        fabric_hosts = (list(ipaddress.ip_network(state.fabric_subnet).hosts())
                        if state.fabric_subnet else [])
        by_name = {n["name"]: n for n in state.nodes}
        for i in range(1, nodes + 1):
            mac_tail = f"{net.network_address.packed[2]:02x}:{i // 256:02x}:{i % 256:02x}"
            by_name.setdefault(f"node{i}", asdict(Node(
                name=f"node{i}", index=i, address=str(hosts[10 + i - 1]),
                mac=f"02:72:64:{mac_tail}",
                fabric_address=str(fabric_hosts[10 + i - 1]) if fabric_hosts else "",
                fabric_mac=f"02:72:66:{mac_tail}",
            )))
        state.nodes = [by_name[k] for k in sorted(by_name, key=lambda n: int(n[4:]))]
        lab_host.check_inotify(sum(1 for entry in state.nodes if not self._running(entry)))
        for entry in state.nodes:
            if not self._running(entry):
                self._start_node(state, entry)
        self._save(state)
        lab_base.ensure_torch(self.dir / "build.log", base=base, log_msg=log)
        self._wait_ssh(state)
        self._wait_stack(state, [n["name"] for n in state.nodes])
        lab_inventory.write_inventory(state, self.dir, self._nodes_dir(state))
        changed = {k: v for k, v in sentinels.items() if lab_host.host_sentinels()[k] != v}
        if changed:
            raise RuntimeError(f"a lab node changed host settings: {changed}")
        log(f"lab {self.name!r}: {len(state.nodes)} nodes up in {time.monotonic() - started:.1f}s; "
            f"inventory {self.inventory}")
        return state

    def _new_state(self, nodes: int, subnet: str | None, fabric_subnet: str | None, mtu: int,
                   fabric_mtu: int, netstack: str) -> LabState:
        """A new lab's state, saved at once under a lock: two labs started at the same time
        must not pick the same free subnets (each only sees the other's saved state)."""
        STATE_ROOT.mkdir(parents=True, exist_ok=True)
        with (STATE_ROOT / ".subnets.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            nets = []
            for flag, given, second in (("--subnet", subnet, 199),
                                        ("--fabric-subnet", fabric_subnet, 198)):
                try:
                    net = ipaddress.ip_network(
                        given or lab_host.pick_subnet(second, STATE_ROOT), strict=True)
                except ValueError as exc:
                    raise UserError(f"{flag} {given}: {exc}") from exc
                if net.version != 4 or net.num_addresses < nodes + 12:
                    raise UserError(
                        f"{flag} {net}: need an IPv4 subnet with room for {nodes} nodes")
                nets.append(net)
            if nets[0].overlaps(nets[1]):
                raise UserError(f"--subnet {nets[0]} and --fabric-subnet {nets[1]} overlap")
            tag = lab_host.root_tag(STATE_ROOT)
            state = LabState(name=self.name, subnet=str(nets[0]), bridge=f"rl{tag}{self.name}m",
                             mtu=mtu, fabric_subnet=str(nets[1]),
                             fabric_bridge=f"rl{tag}{self.name}f", fabric_mtu=fabric_mtu,
                             tag=tag, netstack=netstack)
            self._save(state)
        return state

    def _running(self, entry: dict) -> bool:
        pid = entry.get("pid") or 0
        if not pid:
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if cmdline:
                return b"systemd" in cmdline or b"node-init" in cmdline
            # Empty: a zombie, or a process in the middle of an exec (unshare -> node-init.sh
            # -> systemd), which on a loaded host shows an empty cmdline for a while. Its state
            # tells them apart.
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])

    def _start_node(self, state: LabState, entry: dict) -> None:
        """Boot a node: fresh network namespace and NICs (as after a power cycle), its own
        overlay layer kept from any earlier boot."""
        name, index = entry["name"], entry["index"]
        ns, veth = self._netns(name, state.tag), self._veth(index, state.tag)
        node_dir = self._nodes_dir(state) / name
        self._stop_node(state, entry)  # leftovers of a crashed node
        for sub in ("upper", "work", "root", "containers"):
            (node_dir / sub).mkdir(parents=True, exist_ok=True)
        self._seed_upper(node_dir / "upper", entry, state)

        _ip("netns", "add", ns)
        _ip("link", "add", veth, "mtu", str(state.mtu), "type", "veth", "peer", "name", "eth0",
            "netns", ns)
        _ip("link", "set", veth, "master", state.bridge, "up")
        prefix = ipaddress.ip_network(state.subnet).prefixlen
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "link", "set", "eth0", "address", entry["mac"], "mtu", str(state.mtu), "up")
        _ip("-n", ns, "addr", "add", f"{entry['address']}/{prefix}", "dev", "eth0")
        if state.fabric_bridge:
            fveth = self._veth(index, state.tag, fabric=True)
            # The bridge is the jumbo-capable switch; the node's port starts at the usual 1500.
            _ip("link", "add", fveth, "mtu", str(state.fabric_mtu), "type", "veth", "peer", "name",
                "eth1", "netns", ns)
            _ip("link", "set", fveth, "master", state.fabric_bridge, "up")
            _ip("-n", ns, "link", "set", "eth1", "address", entry["fabric_mac"], "mtu", "1500")
            if state.netstack == "none":
                fprefix = ipaddress.ip_network(state.fabric_subnet).prefixlen
                _ip("-n", ns, "link", "set", "eth1", "up")
                _ip("-n", ns, "addr", "add", f"{entry['fabric_address']}/{fprefix}", "dev",
                    "eth1")
            # Otherwise the node's own network stack brings eth1 up from its configuration.

        cgroup = self._cgroup(name, state.tag)
        cgroup.mkdir(parents=True, exist_ok=True)

        def enter_cgroup() -> None:  # runs in the child, before exec: the node's cgroup root
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

        with as_file(files("rdmaprov.lab") / "node-init.sh") as script:
            init = node_dir / "node-init.sh"
            shutil.copy(script, init)
        lower = lab_base.lower_dirs(state.layer, state.base)
        logf = (node_dir / "console.log").open("a")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "unshare", "--mount", "--pid", "--uts", "--ipc", "--cgroup",
             "--fork", "--kill-child", "/bin/sh", str(init), str(node_dir / "root"), lower,
             str(node_dir / "upper"), str(node_dir / "work"), state.repo, name,
             str(node_dir / "containers"),
             *(f"{src}={dst}" for src, dst in lab_base.shared_dirs().items())],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, preexec_fn=enter_cgroup,
        )
        logf.close()
        entry["pid"] = self._wait_child(proc.pid, node_dir / "console.log")

    @staticmethod
    def _wait_child(unshare_pid: int, console: Path) -> int:
        """The node's PID 1 as the host sees it: unshare's forked child."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                children = Path(
                    f"/proc/{unshare_pid}/task/{unshare_pid}/children").read_text().split()
            except OSError:
                break
            if children:
                return int(children[0])
            time.sleep(0.02)
        raise RuntimeError(f"lab node did not start: {console.read_text(errors='replace')[-500:]}")

    def _seed_upper(self, upper: Path, entry: dict, state: LabState) -> None:
        """Node-specific files, written into the overlay's upper layer before boot. On a
        restart the node's own files (machine-id, network configuration a role edited) stay."""
        name = entry["name"]
        etc = upper / "etc"
        (etc / "ssh").mkdir(parents=True, exist_ok=True)
        (etc / "hostname").write_text(name + "\n")
        # Every node name resolves to its lab address, as on a cluster: a 127.0.1.1 entry for
        # the node's own name makes gloo and NCCL bootstrap advertise loopback to their peers.
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        lines += [f"{n['address']} {n['name']}" for n in state.nodes]
        (etc / "hosts").write_text("\n".join(lines) + "\n")
        if not (etc / "machine-id").is_file():
            (etc / "machine-id").write_text(os.urandom(16).hex() + "\n")
        if state.fabric_subnet:
            prefix = ipaddress.ip_network(state.fabric_subnet).prefixlen
            for rel, (text, mode) in lab_netstack.node_files(
                    state.netstack, "eth1", f"{entry['fabric_address']}/{prefix}").items():
                path = upper / rel
                if not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
                    path.chmod(mode)
        hostkey = etc / "ssh/ssh_host_ed25519_key"
        if not hostkey.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}",
                            "-f", str(hostkey)], check=True)
        ssh_dir = upper / "root/.ssh"
        ssh_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        auth = ssh_dir / "authorized_keys"
        auth.write_text(self.key.with_suffix(".pub").read_text())
        auth.chmod(0o600)

    def _wait_ssh(self, state: LabState, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        pending = {n["name"]: n["address"] for n in state.nodes}
        while pending and time.monotonic() < deadline:
            for entry in state.nodes:
                if entry["name"] in pending and not self._running(entry):
                    console = self._nodes_dir(state) / entry["name"] / "console.log"
                    raise RuntimeError(f"lab node {entry['name']} died while starting: "
                                       f"{console.read_text(errors='replace')[-400:].strip()}")
            for name, addr in list(pending.items()):
                try:
                    with socket.create_connection((addr, 22), timeout=0.5) as sock:
                        if sock.recv(4).startswith(b"SSH"):
                            del pending[name]
                except OSError:
                    pass
            if pending:
                time.sleep(0.2)
        if pending:
            raise RuntimeError(f"lab nodes did not answer on SSH within {timeout:.0f}s: "
                               f"{', '.join(sorted(pending))} (see {self.dir}/nodes/*/console.log)")

    def _wait_stack(self, state: LabState, nodes: list[str], timeout: float = 90) -> None:
        """Until each node's network stack owns eth1 and has brought it up (lab_netstack.OWNS):
        a role run earlier would race the stack's own activation."""
        if not state.fabric_bridge or state.netstack == "none":
            return  # without a stack, eth1's address was set from outside before SSH came up
        argv, marker = lab_netstack.OWNS[state.netstack]
        deadline = time.monotonic() + timeout
        for node in nodes:
            while True:
                shown = self.exec(node, list(argv), check=False, timeout=timeout).stdout
                if marker in shown:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"lab node {node}: the {state.netstack} stack did not bring "
                                       f"eth1 up within {timeout:.0f}s: {shown.strip()[-200:]}")
                time.sleep(0.5)

    def ensure_torch(self, log: Callable[[str], object] = print) -> Path:
        """torch for the lab's validation runs, visible in every node (see base.ensure_torch)."""
        lab_host.require_root()
        return lab_base.ensure_torch(self.dir / "build.log", log_msg=log)

    # ----- down / status / exec ------------------------------------------------------------
    def down(self, log: Callable[[str], object] = print) -> None:
        lab_host.require_root()
        state = self._load()
        if state is None:
            log(f"lab {self.name!r}: nothing to do")
            return
        for entry in state.nodes:
            self._stop_node(state, entry)
        for bridge in (state.bridge, state.fabric_bridge):
            if bridge and _ip("link", "show", bridge, check=False).returncode == 0:
                _ip("link", "del", bridge)
        shutil.rmtree(self._nodes_dir(state), ignore_errors=True)
        with contextlib.suppress(OSError):
            self._cgroup_parent(state.tag).rmdir()  # only succeeds once no lab is left
        # Nothing of the lab is left: its key, inventory, group_vars and build log go too.
        shutil.rmtree(self.dir, ignore_errors=True)
        log(f"lab {self.name!r}: down")

    def _stop_node(self, state: LabState, entry: dict) -> None:
        pid = entry.get("pid") or 0
        if pid and self._running(entry):
            os.kill(pid, signal.SIGKILL)  # the PID namespace dies with its init
            self._wait_gone(pid, 10)
        entry["pid"] = 0
        ns = self._netns(entry["name"], state.tag)
        if ns in _ip("netns", "list").stdout.split():
            _ip("netns", "del", ns)
        _ip("link", "del", self._veth(entry["index"], state.tag), check=False)
        _ip("link", "del", self._veth(entry["index"], state.tag, fabric=True), check=False)
        cgroup = self._cgroup(entry["name"], state.tag)
        if cgroup.exists():
            self._rmdir_cgroup(cgroup)

    @staticmethod
    def _wait_gone(pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return not Path(f"/proc/{pid}").exists()

    def _rmdir_cgroup(self, path: Path) -> None:
        """Remove a node's cgroup. Processes left in it (a node whose lab state was lost) are
        this lab's own, named by this lab's cgroup path: end them, then remove it."""
        procs = self._cgroup_pids(path)
        if procs:
            kill = path / "cgroup.kill"
            if kill.exists():
                with contextlib.suppress(OSError):
                    kill.write_text("1")
            for pid in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while True:
            try:
                for sub in sorted((p for p in path.rglob("*") if p.is_dir()),
                                  key=lambda p: -len(p.parts)):
                    sub.rmdir()
                path.rmdir()
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    left = self._cgroup_pids(path)
                    raise UserError(
                        f"lab {self.name!r}: cannot remove the leftover cgroup {path} "
                        f"({exc.strerror}; processes still in it: "
                        f"{', '.join(map(str, left[:8])) or 'none'}): end them, then run "
                        f"'rdmaprov lab down --name {self.name}'") from exc
                time.sleep(0.1)

    @staticmethod
    def _cgroup_pids(path: Path) -> list[int]:
        pids: list[int] = []
        for procs in path.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids += [int(x) for x in procs.read_text().split()]
        return pids

    def restart(self, node: str, timeout: float = 30,
                log: Callable[[str], object] = print) -> None:
        """Reboot one node: its systemd shuts down cleanly (SIGRTMIN+4 asks PID 1 for a
        poweroff), then it boots again on its own overlay layer with fresh NICs, as after a
        power cycle: eth1 back at 1500 and unconfigured, so only what persists comes back."""
        lab_host.require_root()
        state = self._load()
        entry = next((n for n in (state.nodes if state else []) if n["name"] == node), None)
        if state is None or entry is None:
            raise UserError(f"lab {self.name!r} has no node {node!r}")
        started = time.monotonic()
        pid = entry.get("pid") or 0
        if pid and self._running(entry):
            os.kill(pid, signal.SIGRTMIN + 4)
            if not self._wait_gone(pid, timeout):
                log(f"{node}: no clean shutdown within {timeout:.0f}s; killing it")
        self._start_node(state, entry)
        self._save(state)
        self._wait_ssh(state)
        lab_inventory.write_inventory(state, self.dir, self._nodes_dir(state))
        # Up means booted: the network stack has run its start-up jobs, as after a real reboot.
        booted = self.exec(node, ["systemctl", "is-system-running", "--wait"], check=False,
                           timeout=timeout * 3).stdout.strip()
        self._wait_stack(state, [node], timeout=timeout * 3)
        log(f"lab {self.name!r}: {node} restarted in {time.monotonic() - started:.1f}s "
            f"(systemd: {booted})")

    def status(self) -> list[dict]:
        state = self._load()
        if state is None:
            return []
        rows = []
        for n in state.nodes:
            up = self._running(n)
            ssh = False
            if up:
                try:
                    with socket.create_connection((n["address"], 22), timeout=0.5):
                        ssh = True
                except OSError:
                    pass
            rows.append({"node": n["name"], "address": n["address"], "pid": n["pid"],
                         "running": up, "ssh": ssh})
        return rows

    def node_pid(self, node: str) -> int:
        state = self._load()
        for n in (state.nodes if state else []):
            if n["name"] == node and self._running(n):
                return int(n["pid"])
        raise UserError(f"lab {self.name!r} has no running node {node!r}")

    def exec(self, node: str, argv: list[str], check: bool = True,
             input: str | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run argv inside a node (its namespaces and root), without SSH."""
        pid = self.node_pid(node)
        proc = subprocess.run(
            ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w",
             "/usr/bin/env", "-i", f"PATH={NODE_PATH}", "LANG=C.UTF-8", *argv],
            capture_output=True, text=True, input=input, timeout=timeout, check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(
                f"{node}: {' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    @property
    def addresses(self) -> dict[str, str]:
        state = self._load()
        return {n["name"]: n["address"] for n in (state.nodes if state else [])}
