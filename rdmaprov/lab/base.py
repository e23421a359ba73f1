"""The lab's shared base root filesystem and its local apt repository.

Both are built once on the host and cached under /var/cache/rdmaprov/lab: a debootstrapped
Debian (or Ubuntu) matching the host's distribution, from the mirror in the host's own apt
configuration, and a flat apt repository of the packages the roles install (nodes have no
internet, so they install from it).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rdmaprov.errors import UserError
from rdmaprov.lab import netstack

CACHE_DIR = Path(os.environ.get("RDMAPROV_LAB_CACHE", "/var/cache/rdmaprov/lab"))

# What every node has, as a freshly installed server would.
BASE_PACKAGES = (
    "openssh-server", "python3", "python3-apt", "iproute2", "nftables", "kmod", "netbase",
    "sudo", "systemd", "systemd-sysv", "dbus", "iputils-ping", "procps", "ca-certificates",
)

# What the roles install on nodes, served from the lab's local repository.
REPO_PACKAGES = (
    # rdma_ofed, inbox source (Debian names)
    "rdma-core", "ibverbs-providers", "ibverbs-utils", "infiniband-diags", "rdmacm-utils",
    "perftest", "python3-pyverbs",
    # container_runtime: podman, with runc as the OCI runtime the lab nodes were seen to run;
    # docker for container_runtime_engine=docker (Debian 13 on: its client is docker-cli)
    "podman", "runc", "conmon", "uidmap", "catatonit", "docker.io", "docker-cli",
    # firewall: the firewalld and ufw backends, and a real DHCP client socket (68/udp) for the
    # test that the firewall never cuts a listening service
    "firewalld", "ufw", "isc-dhcp-client",
    # net_mtu's proof installs ping where a node lacks it (also in the base, so --reinstall)
    "iputils-ping",
    # node_tool: what the node-side rdmaprov imports beyond the standard library; python3-venv
    # for slurm_health's wheelhouse route (node_tool's venv is made --without-pip)
    "python3-yaml", "python3-rich", "python3-venv",
    # the network stacks a node can run (lab up --netstack)
    *netstack.all_packages(),
)

# Served where the suite's archive has them (docker-cli: Debian 13 on).
OPTIONAL = frozenset({"docker-cli"}) | netstack.OPTIONAL

# Units that make no sense in a node, or that would reach outside the lab.
MASKED_UNITS = (
    "getty@.service", "console-getty.service", "serial-getty@.service",
    "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "fstrim.timer",
    "systemd-timesyncd.service", "systemd-networkd-wait-online.service",
)

# Host directories every node sees read-only: torch for the validation worker (the nodes have no
# internet and no pip index), and a root filesystem tarball that podman in a node imports as the
# lab's worker image (no registry is reachable either).
TORCH_NODE_DIR = "/opt/rdmaprov-torch"
IMAGES_NODE_DIR = "/srv/rdmaprov-images"
# Extra flat repositories (one per package set, e.g. Slurm's), filled on demand by their users.
EXTRA_REPOS_NODE_DIR = "/srv/rdmaprov-repos"
WORKER_IMAGE_TAR = f"{IMAGES_NODE_DIR}/lab-worker.tar"
TORCH_REQUIREMENT = os.environ.get("RDMAPROV_LAB_TORCH", "torch==2.13.0")

REPO_LIST = "deb [trusted=yes] file:/srv/rdmaprov-repo ./\n"


@dataclass(frozen=True)
class Distro:
    suite: str
    mirror: str

    @property
    def key(self) -> str:
        return f"{self.suite}-{_digest(self.mirror, *BASE_PACKAGES)}"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:10]


def host_suite() -> str:
    text = Path("/etc/os-release").read_text()
    match = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.M)
    if not match:
        raise UserError("/etc/os-release has no VERSION_CODENAME: pass --suite")
    return match.group(1)


def host_mirror() -> str:
    """The first Debian/Ubuntu archive URL in the host's own apt configuration."""
    candidates: list[Path] = [Path("/etc/apt/sources.list")]
    src_dir = Path("/etc/apt/sources.list.d")
    if src_dir.is_dir():
        candidates += sorted(src_dir.glob("*.list")) + sorted(src_dir.glob("*.sources"))
    for path in candidates:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("deb ") and "security" not in line:
                for token in line.split()[1:]:
                    if re.match(r"https?://", token):
                        return token
            if line.startswith("URIs:"):
                for token in line.split()[1:]:
                    if re.match(r"https?://", token) and "security" not in token:
                        return token
    raise UserError("no archive mirror in this host's apt configuration: pass --mirror URL")


def _run(argv: list[str], log: Path, **kw: object) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-5:]
        raise UserError(f"{argv[0]} failed (exit {proc.returncode}), see {log}: {' | '.join(tail)}")


def fs_type(path: Path) -> str:
    """The filesystem type of the mount holding `path` (from /proc/self/mountinfo)."""
    path = path.resolve()
    best, kind = "", ""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        mount_point = left.split()[4].replace("\\040", " ")
        inside = str(path) == mount_point or str(path).startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, kind = mount_point, right.split()[0]
    return kind


def writable_layer_dir(wanted: Path, name: str) -> Path:
    """Where overlay upper/work directories can live: `wanted`, unless it is itself on overlayfs
    (a container's or a chroot's root), which the kernel refuses as an upper layer; then a
    directory on /run's tmpfs."""
    probe = wanted
    while not probe.exists():
        probe = probe.parent
    if fs_type(probe) != "overlay":
        return wanted
    alt = Path("/run/rdmaprov-lab") / name
    if fs_type(Path("/run")) in ("overlay", ""):
        raise UserError(f"{wanted} is on overlayfs and /run is not a tmpfs: the lab needs a "
                        "filesystem that can hold overlay upper layers (set RDMAPROV_LAB_DIR)")
    return alt


def _check_tools() -> None:
    for tool in ("debootstrap", "apt-ftparchive", "ssh-keygen", "unshare", "nsenter"):
        if not shutil.which(tool):
            raise UserError(f"the lab needs '{tool}' on this host (run ./run.sh setup)")


def ensure_base(distro: Distro, log: Path) -> Path:
    """The node template root filesystem, built once per distribution and package set."""
    _check_tools()
    base = CACHE_DIR / f"base-{distro.key}"
    if (base / ".rdmaprov-done").is_file():
        return base
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = base.with_name(base.name + ".tmp")
    if tmp.exists():
        _umount_below(tmp)
        shutil.rmtree(tmp)
    _run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
         distro.suite, str(tmp), distro.mirror],
        log,
    )
    _customise(tmp)
    (tmp / ".rdmaprov-done").write_text(distro.mirror + "\n")
    tmp.rename(base)
    return base


def ensure_repo(distro: Distro, base: Path, log: Path,
                packages: tuple[str, ...] = REPO_PACKAGES) -> Path:
    """A flat apt repository of `packages` and whatever they need beyond the base."""
    repo = CACHE_DIR / f"repo-{distro.key}-{_digest(*packages)}"
    if (repo / "Packages").is_file():
        return repo
    _check_tools()
    work = writable_layer_dir(CACHE_DIR / f"repo-build-{os.getpid()}",
                              f"repo-build-{os.getpid()}")
    root = work / "root"
    for sub in ("upper", "work", "root"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    # Resolve inside a throwaway overlay of the base, so the dependency closure is exactly
    # what a node lacks, and the cached base stays untouched.
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={base},upperdir={work / 'upper'},workdir={work / 'work'}",
                    str(root)], check=True)
    try:
        (root / "etc/apt/sources.list.d/rdmaprov-lab.list").unlink(missing_ok=True)
        (root / "etc/apt/sources.list").write_text(f"deb {distro.mirror} {distro.suite} main\n")
        shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
        subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
        _run(["chroot", str(root), "apt-get", "-q", "update"], log)
        # --reinstall: a package the base already has (ping) is fetched too, so a node that
        # lost it can install it again.
        _run(
            ["chroot", str(root), "apt-get", "-q", "-y", "--no-install-recommends",
             "install", "--reinstall", "--download-only", *_available(root, packages)],
            log, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        tmp_repo = repo.with_name(repo.name + ".tmp")
        shutil.rmtree(tmp_repo, ignore_errors=True)
        tmp_repo.mkdir(parents=True)
        for deb in (root / "var/cache/apt/archives").glob("*.deb"):
            shutil.copy(deb, tmp_repo / deb.name)
        with (tmp_repo / "Packages").open("w") as out:
            subprocess.run(["apt-ftparchive", "packages", "."], cwd=tmp_repo, stdout=out,
                           check=True)
        shutil.rmtree(repo, ignore_errors=True)
        tmp_repo.rename(repo)
    finally:
        _umount_below(root)
        subprocess.run(["umount", "-l", str(root)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return repo


def _available(root: Path, packages: tuple[str, ...]) -> list[str]:
    """`packages` less the optional ones this suite's archive does not have."""
    keep = []
    for pkg in packages:
        if pkg in OPTIONAL:
            proc = subprocess.run(["chroot", str(root), "apt-cache", "show", "--no-all-versions",
                                   pkg], capture_output=True, text=True, check=False)
            if proc.returncode != 0 or not proc.stdout.strip():
                continue
        keep.append(pkg)
    return keep


def ensure_netstack_layer(distro: Distro, base: Path, repo: Path, stack: str,
                          log: Path) -> Path | None:
    """An overlay layer above the base with `stack` installed from the lab's repository (the
    way a node would install it) and its services enabled; None for the plain node."""
    if stack == "none":
        return None
    layer = CACHE_DIR / f"layer-{stack}-{repo.name}"
    if (layer / ".rdmaprov-done").is_file():
        return layer
    work = writable_layer_dir(CACHE_DIR / f"layer-build-{os.getpid()}",
                              f"layer-build-{os.getpid()}")
    upper, root = work / "upper", work / "root"
    for sub in ("upper", "work", "root"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={base},upperdir={upper},workdir={work / 'work'}", str(root)],
                   check=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        (root / "srv/rdmaprov-repo").mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", "-o", "ro", str(repo), str(root / "srv/rdmaprov-repo")],
                       check=True)
        subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
        # No service starts in the chroot (the host's kernel, the host's network).
        policy = root / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        _run(["chroot", str(root), "apt-get", "-q", "update"], log)
        _run(["chroot", str(root), "apt-get", "-q", "-y", "--no-install-recommends", "install",
              *_available(root, netstack.PACKAGES[stack])], log, env=env)
        for unit in netstack.UNITS[stack]:
            _run(["chroot", str(root), "systemctl", "enable", unit], log)
        for rel, (text, mode) in netstack.LAYER_FILES.get(stack, {}).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
            (root / rel).chmod(mode)
        policy.unlink()
        _run(["chroot", str(root), "apt-get", "clean"], log)
        for lists in (root / "var/lib/apt/lists").glob("*"):
            if lists.is_file() and lists.name != "lock":
                lists.unlink()
    finally:
        _umount_below(root)
        subprocess.run(["umount", "-l", str(root)], check=False)
    tmp = layer.with_name(layer.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if fs_type(CACHE_DIR) != "overlay":
        # cp -a keeps what makes it a layer: whiteouts (0/0 device nodes) and opaque-dir xattrs.
        subprocess.run(["cp", "-a", str(upper), str(tmp)], check=True)
    else:
        # overlayfs cannot hold a whiteout (cp: "cannot create special file"): keep the merged
        # view instead, a whole root that nodes stack on alone (lower_dirs).
        merged = work / "merged"
        merged.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"ro,lowerdir={upper}:{base}", str(merged)], check=True)
        try:
            tmp.mkdir(parents=True)
            subprocess.run(["cp", "-a", f"{merged}/.", str(tmp)], check=True)
        finally:
            subprocess.run(["umount", "-l", str(merged)], check=False)
        (tmp / WHOLE_ROOT).write_text(f"{base}\n")
    shutil.rmtree(work, ignore_errors=True)
    (tmp / ".rdmaprov-done").write_text(stack + "\n")
    tmp.rename(layer)
    return layer


# In a layer that is a whole root (built where the cache is on overlayfs): the base it holds.
WHOLE_ROOT = ".rdmaprov-whole-root"


def lower_dirs(layer: str, base: str) -> str:
    """A node's overlay lowerdir: its netstack layer above the base, or the layer alone when it
    is a whole root, or the base alone."""
    if not layer:
        return base
    if (Path(layer) / WHOLE_ROOT).is_file():
        return layer
    return f"{layer}:{base}"


def _umount_below(path: Path) -> None:
    mounts = [
        line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(str(path) + "/")
    ]
    for target in sorted(mounts, reverse=True):
        subprocess.run(["umount", "-l", target], check=False)


def _customise(root: Path) -> None:
    """Make the base a node template: no apt sources but the lab's repo, no host keys (each node
    gets its own), no consoles, nothing that reaches outside."""
    for path in [root / "etc/apt/sources.list", *(root / "etc/apt/sources.list.d").glob("*")]:
        path.unlink(missing_ok=True)
    (root / "etc/apt/sources.list.d/rdmaprov-lab.list").write_text(REPO_LIST)
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/ssh/sshd_config.d/rdmaprov-lab.conf").write_text(
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n"
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
    )
    (root / "etc/resolv.conf").write_text("nameserver 127.0.0.1\n")
    (root / "etc/machine-id").write_text("")
    for unit in MASKED_UNITS:
        link = root / "etc/systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)


def shared_dirs() -> dict[Path, str]:
    """Host directory → where a node sees it (read-only). Created empty; filled on demand."""
    dirs = {CACHE_DIR / "share/torch": TORCH_NODE_DIR, CACHE_DIR / "share/images": IMAGES_NODE_DIR,
            CACHE_DIR / "share/repos": EXTRA_REPOS_NODE_DIR}
    for host_dir in dirs:
        host_dir.mkdir(parents=True, exist_ok=True)
    return dirs


def ensure_torch(log: Path, base: Path | None = None,
                 log_msg: Callable[[str], object] = print) -> Path:
    """Install torch (CPU) for the nodes' python3 into the shared torch directory, and tar a node
    root filesystem as the worker image. Running nodes see both at once (same bind mounts)."""
    torch_dir = CACHE_DIR / "share/torch"
    marker = torch_dir / ".rdmaprov-done"
    if not marker.is_file() or marker.read_text().strip() != TORCH_REQUIREMENT:
        log_msg(f"installing {TORCH_REQUIREMENT} for lab nodes into {torch_dir}")
        shared_dirs()
        for child in torch_dir.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        _run([sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--target",
              str(torch_dir), "--python-version", "3.11", "--only-binary=:all:",
              TORCH_REQUIREMENT], log)
        marker.write_text(TORCH_REQUIREMENT + "\n")
    image = CACHE_DIR / "share/images/lab-worker.tar"
    bases = sorted(CACHE_DIR.glob("base-*/.rdmaprov-done"))
    if not image.is_file() and (base or bases):
        root = base or bases[-1].parent
        tmp = image.with_suffix(".tmp")
        _run(["tar", "-C", str(root), "--exclude=./proc/*", "--exclude=./sys/*",
              "--exclude=./dev/*", "-cf", str(tmp), "."], log)
        tmp.rename(image)
    return torch_dir
