"""The options every playbook-running command shares, as data: what `cli/options.py` parses
and what the engine's RunSpec is built from. Below `cli/`, so the packages that run playbooks
(rdmaprov/validate/) take them without importing the command line."""

from __future__ import annotations

import atexit
import getpass
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rdmaprov import settings
from rdmaprov.engine import RunSpec
from rdmaprov.errors import UserError
from rdmaprov.inventory import Inventory

MAX_FORKS_OPTION = 1000


@dataclass(frozen=True)
class Connection:
    """ansible-playbook's connection, become and vault options; files only, never a secret."""
    remote_user: str | None = None
    private_key: Path | None = None
    connection_password_file: Path | None = None
    become_password_file: Path | None = None
    vault_password_files: tuple[Path, ...] = ()

    def argv(self) -> list[str]:
        """The ansible-playbook arguments, one word each (no shell)."""
        out: list[str] = []
        for flag, value in (("--user", self.remote_user), ("--private-key", self.private_key),
                            ("--connection-password-file", self.connection_password_file),
                            ("--become-password-file", self.become_password_file)):
            if value is not None:
                out += [flag, str(value)]
        for f in self.vault_password_files:
            out += ["--vault-password-file", str(f)]
        return out


_SECRETS_DIR: list[Path] = []


def asked_secret(flag: str, prompt: str) -> Path:
    """Ask for a password on the terminal; it goes into a 0600 file in a 0700 dir of ours, which
    is removed when rdmaprov exits (Ctrl-C and SIGTERM included). Never an argv or environment
    value, never in the artifacts."""
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))  # getpass would read stdin
        secret = getpass.getpass(prompt)
    except (EOFError, OSError):
        raise UserError(f"{flag}: no terminal to ask the password on; give it in a file "
                        "instead (--connection-password-file, --become-password-file, "
                        "--vault-password-file)") from None
    if not _SECRETS_DIR:
        _SECRETS_DIR.append(Path(tempfile.mkdtemp(prefix="rdmaprov-secrets-")))
        atexit.register(shutil.rmtree, _SECRETS_DIR[0], True)
    path = _SECRETS_DIR[0] / flag.split("/")[-1].lstrip("-")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret + "\n")
    return path


@dataclass(frozen=True)
class RunOptions:
    check: bool = False
    diff: bool = False
    limit: str | None = None
    tags: tuple[str, ...] = ()
    skip_tags: tuple[str, ...] = ()
    extra_vars: tuple[str, ...] = ()
    forks: str | int | None = None
    strategy: str = "auto"
    ansible_profile: str = "tuned"
    keep_artifacts: Path | None = None
    json: bool = False
    verbose: int = 0
    retry_failed: bool = False
    list_tasks: bool = False
    connection: Connection = field(default_factory=Connection)


def _csv(values: list[str] | tuple[str, ...] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def forks(raw: str | int | None) -> int | None:
    if raw in (None, ""):
        return None
    try:
        value = int(str(raw))
    except ValueError:
        raise UserError(f"--forks/RDMAPROV_FORKS: {raw!r} is not an integer") from None
    if not 1 <= value <= MAX_FORKS_OPTION:
        raise UserError(f"--forks/RDMAPROV_FORKS: {value} is out of range "
                        f"(1..{MAX_FORKS_OPTION})")
    return value


def check_choices(strategy: str, profile: str) -> None:
    """Choices given through the environment bypass argparse; check them the same way."""
    for opt, env, allowed, value in (
            ("--strategy", "RDMAPROV_STRATEGY", settings.STRATEGIES, strategy),
            ("--ansible-profile", "RDMAPROV_ANSIBLE_PROFILE", settings.PROFILES, profile)):
        if value not in allowed:
            raise UserError(f"{opt}/{env}: {value!r} is not one of {', '.join(allowed)}")


def check(opts: RunOptions) -> None:
    """The choices and --forks, before anything runs (one line, exit 1)."""
    check_choices(opts.strategy, opts.ansible_profile)
    forks(opts.forks)


def run_spec(opts: RunOptions, playbook: Path, inventory: Inventory) -> RunSpec:
    check_choices(opts.strategy, opts.ansible_profile)
    return RunSpec(
        playbook=playbook,
        inventory=inventory.path,
        extravars=inventory.extravars,
        user_vars=frozenset(inventory.extravars),  # -e/--set: redacted from kept artifacts
        limit=opts.limit,
        tags=_csv(opts.tags),
        skip_tags=_csv(opts.skip_tags),
        forks=forks(opts.forks),
        host_count=len(inventory.selected),
        check=opts.check,
        diff=opts.diff,
        verbosity=opts.verbose,
        playbook_args=tuple(opts.connection.argv()) + (("--list-tasks",) if opts.list_tasks
                                                         else ()),
        keep_artifacts=opts.keep_artifacts,
        profile=opts.ansible_profile,
        # 'auto' settled here, for this playbook; the run's summary names the strategy.
        strategy=settings.resolve_strategy(opts.strategy, playbook.name,
                                          len(inventory.selected)),
    )
