"""Every Ansible setting rdmaprov applies to a run, in one place.

The settings travel as ANSIBLE_* environment variables of the ansible-playbook process (they
outrank any ansible.cfg), and the engine writes them to ``env/envvars`` in the private data
dir so that ``--keep-artifacts`` shows exactly what a run used.

``profile="tuned"`` (the default) is what rdmaprov is measured with; ``profile="defaults"``
keeps Ansible's own defaults for speed (for the benchmark that compares the two) while keeping
what rdmaprov needs for correctness: host keys checked, no retry files, parse errors fatal.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from rdmaprov.errors import UserError

MAX_FORKS = 50
PROFILES = ("tuned", "defaults")
STRATEGIES = ("auto", "linear", "free", "mitogen")
# UNIX sockets hold at most 107 bytes of path; Ansible names each socket with a 10-character
# hash and ssh adds a ~17-byte temporary suffix while it creates one.
_MAX_CONTROL_DIR = 107 - 17 - 11


@dataclass(frozen=True)
class Row:
    """One setting, with the reason rdmaprov sets it (shown by ``describe``)."""

    env: str
    value: str
    why: str


def default_forks(host_count: int) -> int:
    """One fork per host up to MAX_FORKS: tasks mostly wait on the network, not the CPU."""
    return max(1, min(MAX_FORKS, host_count))


def control_path_dir(key: str = "") -> Path:
    """A short, private directory for SSH ControlMaster sockets, kept across runs.

    Kept across runs so that a re-run within ControlPersist reuses the open connections;
    private (0700, ours) because anyone who can reach a master socket can use its session.
    One subdirectory per ``key`` (the engine gives the inventory and the SSH settings): runs of
    one user against two inventories never share a master, so that one run never rides on a
    connection another opened to another machine at the same address, with other keys or
    options. Runs against one inventory share them, as ssh multiplexing is made for.

    ``$RDMAPROV_SSH_CONTROL_DIR`` names the base directory; it is created 0700 when missing
    and must be this user's, 0700, not a symlink, and every directory above it writable only by
    its owner (root or this user) or sticky (/tmp): what makes a socket path safe, wherever it is.
    """
    override = os.environ.get("RDMAPROV_SSH_CONTROL_DIR")
    if override:
        base = Path(override).absolute()
    else:
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        parent = Path(runtime) if runtime and len(runtime) < 40 else Path("/tmp")
        base = parent / f"rdmaprov-{os.getuid()}" / "cp"
    tag = hashlib.sha256(key.encode()).hexdigest()[:8]
    if len(str(base)) + len(tag) + 1 > _MAX_CONTROL_DIR:
        raise UserError(f"SSH control directory {base} is longer than "
                        f"{_MAX_CONTROL_DIR - len(tag) - 1} characters (UNIX socket path "
                        "limit); set RDMAPROV_SSH_CONTROL_DIR")
    _safe_ancestors(base.parent)
    for d in (base.parent, base, base / tag):
        if d == base.parent and override:
            continue  # the user's own choice of parent: only its safety counts
        try:
            d.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create SSH control directory {d}: {exc.strerror}") from exc
        st = d.lstat()
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() \
                or st.st_mode & 0o077:
            raise UserError(f"SSH control directory {d} must be a directory owned by this user "
                            f"with mode 0700 (it is {_describe(st)})")
    return base / tag


def _describe(st: os.stat_result) -> str:
    kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "a directory" if stat.S_ISDIR(
        st.st_mode) else "not a directory"
    return f"{kind}, owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}"


def _safe_ancestors(path: Path) -> None:
    """Refuse a directory that another user could swap out from under the sockets: one above
    the control directory writable by a user other than its owner (group or others, without
    the sticky bit), or owned by someone other than root or this user."""
    for d in [path, *path.parents]:
        try:
            st = d.stat()
        except FileNotFoundError:
            continue  # created below, 0700
        except OSError as exc:
            raise UserError(f"SSH control directory: cannot inspect {d}: {exc.strerror}") from exc
        foreign_owner = st.st_uid not in (0, os.getuid())
        open_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX
        if foreign_owner or open_write:
            raise UserError(f"SSH control directory under {d}, which {_describe(st)} lets "
                            "another user replace what is in it; choose a directory whose "
                            "parents only root or you can write (RDMAPROV_SSH_CONTROL_DIR)")


def mitogen_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("ansible_mitogen") is not None


# The playbooks that converge a fleet, where the strategy's speed is what users feel; a
# validation's time is its all_reduce: it keeps the linear strategy its fail-fast was measured in.
FAST_PLAYBOOKS = ("site.yml", "reconfigure.yml")


def resolve_strategy(strategy: str, playbook: str = "site.yml", hosts: int = 2) -> str:
    """The strategy a run uses: 'auto' is mitogen for FAST_PLAYBOOKS on more than one host where
    the package is installed (faster on a CPU-bound control host, same results:
    tests/integration/test_bootstrap_lab.py), else linear. One host gains little, and is often
    this host under a local connection, which mitogen would enter through sudo even as root.
    site.yml keeps linear ordering: net_mtu's path proof reads its peers' facts.
    """
    if strategy == "auto":
        fast = playbook in FAST_PLAYBOOKS and hosts > 1 and mitogen_installed()
        return "mitogen" if fast else "linear"
    return strategy


def mitogen_strategy_dir() -> Path:
    """Where the mitogen package keeps its Ansible strategy plugins."""
    try:
        import ansible_mitogen
    except ImportError as exc:
        raise UserError("--strategy mitogen needs the 'mitogen' package in rdmaprov's "
                        "environment (pip install mitogen)") from exc
    return Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"


def rows(*, profile: str = "tuned", strategy: str = "linear",
         control_dir: Path | None = None, local_temp: Path | None = None) -> list[Row]:
    """The settings of one run. ``control_dir`` is required for the tuned profile."""
    if profile not in PROFILES:
        raise UserError(f"unknown settings profile {profile!r} (choose from {', '.join(PROFILES)})")
    if strategy not in STRATEGIES:
        raise UserError(f"unknown strategy {strategy!r} (choose from {', '.join(STRATEGIES)})")
    strategy = resolve_strategy(strategy)
    out = [
        Row("ANSIBLE_HOST_KEY_CHECKING", "True",
            "ansible-runner turns it off unless set; a cluster's host keys are checked"),
        Row("ANSIBLE_RETRY_FILES_ENABLED", "False", "no .retry files next to the playbooks"),
        Row("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "True",
            "an inventory that does not parse is an error, not an empty inventory"),
        Row("ANSIBLE_DUPLICATE_YAML_DICT_KEY", "error",
            "a key given twice in YAML is a mistake, not 'last one wins'"),
        Row("ANSIBLE_NOCOLOR", "True", "the artifacts' stdout stays plain text"),
        Row("ANSIBLE_PYTHON_INTERPRETER", "auto_silent",
            "discover the node's python without a warning per host"),
        Row("ANSIBLE_TIMEOUT", "30", "seconds to wait for an SSH connection: Ansible's 10 s "
            "calls a busy node's sshd unreachable; a refused connection still fails at once"),
    ]
    if local_temp is not None:
        out.append(Row("ANSIBLE_LOCAL_TEMP", str(local_temp),
                       "control-side temp files live in the run's private dir"))
    if profile == "tuned":
        if control_dir is None:
            raise ValueError("the tuned profile needs control_dir")
        out += [
            Row("ANSIBLE_PIPELINING", "True",
                "one SSH round trip per task instead of put + exec + cleanup"),
            Row("ANSIBLE_SSH_ARGS", "-o ControlMaster=auto -o ControlPersist=60s",
                "reuse one SSH connection per host; no -C: on a LAN compression only costs CPU"),
            Row("ANSIBLE_SSH_CONTROL_PATH_DIR", str(control_dir),
                "short private socket dir (UNIX socket paths are limited to 107 bytes)"),
            Row("ANSIBLE_GATHERING", "explicit",
                "roles gather only the fact subsets they need"),
        ]
    if strategy == "free":
        out.append(Row("ANSIBLE_STRATEGY", "free", "hosts run ahead without waiting per task"))
    elif strategy == "mitogen":
        out += [
            Row("ANSIBLE_STRATEGY_PLUGINS", str(mitogen_strategy_dir()),
                "mitogen's strategy plugins (3.5-5x faster on a CPU-bound control host)"),
            Row("ANSIBLE_STRATEGY", "mitogen_linear", "linear semantics over mitogen"),
        ]
    return out


def environment(settings_rows: list[Row]) -> dict[str, str]:
    return {r.env: r.value for r in settings_rows}


def describe(settings_rows: list[Row]) -> str:
    width = max(len(r.env) for r in settings_rows)
    return "\n".join(f"{r.env:<{width}}  {r.value}  # {r.why}" for r in settings_rows)
