"""The option group every playbook-running command shares (bootstrap, reconfigure, validate).

``add_run_options(parser)`` adds the options; ``run_spec(args, playbook, inventory)`` turns the
parsed namespace into an engine RunSpec, reading the environment variables named in the help
and raising UserError (exit 1) for a bad value.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rdmaprov import run_options, settings
from rdmaprov.engine import RunSpec
from rdmaprov.errors import UserError
from rdmaprov.inventory import Inventory
from rdmaprov.run_options import RunOptions

EXIT_CODES_EPILOG = """\
exit codes:
  0  every host ok (changes allowed)
  1  usage or input error: bad flag, inventory, variable or missing file; no host contacted
  2  some host failed or was unreachable (the summary names each, with its task and message)
"""

def add_run_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("run options (shared by bootstrap, reconfigure, validate)")
    g.add_argument("-C", "--check", action="store_true",
                   help="dry run: report what would change, change nothing")
    g.add_argument("-D", "--diff", action="store_true",
                   help="show the changes to files and settings (with --check: the drift)")
    g.add_argument("--list-hosts", action="store_true",
                   help="print the hosts the run would touch (after --limit) and stop; no host "
                        "is contacted")
    g.add_argument("--list-tasks", action="store_true",
                   help="print the playbook's tasks (ansible-playbook --list-tasks) and stop; no "
                        "host is contacted")
    g.add_argument("-l", "--limit", metavar="PATTERN",
                   help="only these hosts/groups (Ansible host pattern, e.g. 'gpu:!node7')")
    g.add_argument("--retry-failed", action="store_true",
                   help="only the hosts that failed or were unreachable in earlier runs "
                        "against this inventory (Ansible's --limit @FILE; the file is in "
                        "$RDMAPROV_RETRY_DIR, default ~/.cache/rdmaprov/retry)")
    g.add_argument("-t", "--tags", action="append", metavar="TAGS",
                   help="only tasks with these tags (comma-separated, repeatable)")
    g.add_argument("--skip-tags", action="append", metavar="TAGS",
                   help="skip tasks with these tags (comma-separated, repeatable)")
    g.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                   help="extra variables: key=value, YAML/JSON, or @file (repeatable; later "
                        "ones win); checked like inventory variables")
    g.add_argument("-f", "--forks", metavar="N",
                   default=os.environ.get("RDMAPROV_FORKS"),
                   help="parallel hosts (env RDMAPROV_FORKS; default: one per host, at most "
                        f"{settings.MAX_FORKS})")
    g.add_argument("--strategy", choices=settings.STRATEGIES,
                   default=os.environ.get("RDMAPROV_STRATEGY", "auto"),
                   help="Ansible strategy; 'auto' (default): mitogen where the mitogen package "
                        "is installed (pip install 'rdmaprov[fast]'; several times faster on a "
                        "fleet), else linear (env RDMAPROV_STRATEGY)")
    g.add_argument("--ansible-profile", choices=settings.PROFILES,
                   default=os.environ.get("RDMAPROV_ANSIBLE_PROFILE", "tuned"),
                   help="'tuned' (pipelining, ControlPersist, explicit facts) or Ansible's "
                        "'defaults', for comparison (env RDMAPROV_ANSIBLE_PROFILE; default tuned)")
    g.add_argument("--keep-artifacts", metavar="DIR", type=Path,
                   default=os.environ.get("RDMAPROV_KEEP_ARTIFACTS") or None,
                   help="keep ansible-runner's private data dir (settings, events, stdout) in "
                        "DIR; the last runs are kept there (env RDMAPROV_KEEP_ARTIFACTS; "
                        "default: a temporary dir, removed)")
    g.add_argument("--json", action="store_true",
                   help="print one JSON result document on stdout; progress goes to stderr")
    add_connection_options(parser)
    g.add_argument("-v", "--verbose", action="count", default=0,
                   help="one progress line per host and task where there is no terminal (else one "
                        "per task), every host's full report after the run (bootstrap, "
                        "reconfigure), and more Ansible detail in the kept artifacts (repeat for "
                        "more)")


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """-q/--quiet, for the commands whose run output rdmaprov.outcome prints."""
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only what changed, the failures and the last line (no "
                             "progress lines, role reports or summary table); errors always "
                             "show")


def quiet(args: argparse.Namespace) -> bool:
    """-q, checked against -v: one of them."""
    if getattr(args, "quiet", False) and args.verbose:
        raise UserError("-q/--quiet and -v/--verbose: give one")
    return bool(getattr(args, "quiet", False))


def add_inventory(parser: argparse.ArgumentParser, *, required: bool = True,
                  help: str = "inventory file or directory (INI or YAML)") -> None:
    """INVENTORY as a word or as ansible-playbook's `-i INVENTORY` (cli.main settles which)."""
    parser.add_argument("inventory", type=Path, nargs="?", help=help)
    parser.add_argument("-i", "--inventory", dest="inventory_flag", type=Path, action="append",
                        metavar="INVENTORY", help="the inventory, as ansible-playbook takes it "
                        "(instead of the INVENTORY word)")
    parser.set_defaults(inventory_required=required)


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """ansible-playbook's connection, privilege and vault options, meaning what they mean there."""
    g = parser.add_argument_group("connection, become and vault (as ansible-playbook)")
    g.add_argument("-u", "--user", dest="remote_user", metavar="REMOTE_USER",
                   help="connect as this user (an inventory's ansible_user wins, as in Ansible)")
    g.add_argument("--private-key", "--key-file", dest="private_key", metavar="FILE", type=Path,
                   help="SSH private key file")
    g.add_argument("-k", "--ask-pass", action="store_true",
                   help="ask for the SSH password (needs sshpass on this host)")
    g.add_argument("--connection-password-file", metavar="FILE", type=Path,
                   help="the SSH password, in a file")
    g.add_argument("-K", "--ask-become-pass", action="store_true",
                   help="ask for the privilege escalation (sudo) password")
    g.add_argument("--become-password-file", metavar="FILE", type=Path,
                   help="the privilege escalation (sudo) password, in a file "
                        "(or ANSIBLE_BECOME_PASSWORD_FILE)")
    g.add_argument("-J", "--ask-vault-pass", "--ask-vault-password", dest="ask_vault_pass",
                   action="store_true", help="ask for the vault password")
    g.add_argument("--vault-password-file", "--vault-pass-file", dest="vault_password_files",
                   metavar="FILE", type=Path, action="append",
                   help="the vault password file (or script), repeatable")


def list_only(args: argparse.Namespace, inventory: Inventory, playbook: Path) -> int | None:
    """--list-hosts / --list-tasks: what the run would touch or do, then stop (an exit code);
    None when neither was asked. Neither contacts a host."""
    from rdmaprov.textsafe import safe_line

    if getattr(args, "list_hosts", False):
        for host in inventory.selected:
            print(safe_line(host))
        return 0
    if not getattr(args, "list_tasks", False):
        return None
    from rdmaprov.engine import RunnerSession

    said: list[str] = []

    def keep(event: Mapping[str, Any]) -> None:
        if event.get("event") == "verbose" and event.get("stdout"):
            said.extend(str(event["stdout"]).splitlines())

    result = RunnerSession(run_spec(args, playbook, inventory), on_event=keep).run()
    # ansible-playbook's listing starts at its "playbook:" line; before it, Python's warnings.
    start = next((i for i, line in enumerate(said) if line.startswith("playbook: ")), 0)
    for line in said[start:]:
        print(safe_line(line))
    if result.error:
        raise UserError(f"--list-tasks: {result.error}")
    return 0


def retry_file(inventory: Path) -> Path:
    """Where the failed hosts of runs against ``inventory`` are kept (one name a line)."""
    import hashlib

    base = Path(os.environ.get("RDMAPROV_RETRY_DIR")
                or Path.home() / ".cache" / "rdmaprov" / "retry")
    key = hashlib.sha256(str(inventory.resolve()).encode()).hexdigest()[:12]
    return base / f"{inventory.name}-{key}.retry"


def apply_retry(args: argparse.Namespace) -> None:
    """--retry-failed → --limit @retry-file (combined with a --limit the user gave)."""
    if not getattr(args, "retry_failed", False):
        return
    path = retry_file(args.inventory)
    if not path.is_file() or not path.read_text().split():
        raise UserError(f"--retry-failed: no failed hosts recorded for {args.inventory}")
    args.limit = f"@{path}" if not args.limit else f"@{path}:&{args.limit}"


def record_retry(inventory: Path, ran: list[str], failed: list[str]) -> Path | None:
    """Keep the hosts still failing: earlier failures not re-run, plus this run's."""
    path = retry_file(inventory)
    old = path.read_text().split() if path.is_file() else []
    keep = sorted({h for h in old if h not in ran} | set(failed))
    if not keep:
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{h}\n" for h in keep))
    return path


def of(args: argparse.Namespace) -> RunOptions:
    """The shared run options as the data the packages below `cli/` take."""
    return RunOptions(
        check=args.check, diff=args.diff, limit=args.limit, tags=tuple(args.tags or ()),
        skip_tags=tuple(args.skip_tags or ()), extra_vars=tuple(args.extra_vars or ()),
        forks=args.forks, strategy=args.strategy, ansible_profile=args.ansible_profile,
        keep_artifacts=args.keep_artifacts, json=args.json, verbose=args.verbose,
        retry_failed=getattr(args, "retry_failed", False),
        list_tasks=getattr(args, "list_tasks", False),
        connection=connection_of(args))


def connection_of(args: argparse.Namespace) -> run_options.Connection:
    """The connection options, each file checked now (one line, exit 1, no host contacted);
    an asked password is asked once, here, and kept in a private file until rdmaprov exits.
    The answer is kept on ``args``: a command that builds its run options again (bootstrap's
    validation step, a second play) reuses it rather than asking again."""
    kept = getattr(args, "_connection", None)
    if isinstance(kept, run_options.Connection):
        return kept

    def readable(flag: str, path: Path | None) -> Path | None:
        if path is None:
            return None
        if not path.is_file() or not os.access(path, os.R_OK):
            raise UserError(f"{flag} {path}: no readable file there")
        return path.resolve()

    conn = run_options.Connection(
        remote_user=getattr(args, "remote_user", None) or None,
        private_key=readable("--private-key", getattr(args, "private_key", None)),
        connection_password_file=readable("--connection-password-file",
                                          getattr(args, "connection_password_file", None)),
        become_password_file=readable("--become-password-file",
                                      getattr(args, "become_password_file", None)),
        vault_password_files=tuple(readable("--vault-password-file", f) or f
                                   for f in getattr(args, "vault_password_files", None) or ()))
    for flag, asked, field, prompt in (
            ("-k/--ask-pass", "ask_pass", "connection_password_file", "SSH password: "),
            ("-K/--ask-become-pass", "ask_become_pass", "become_password_file",
             "BECOME password: "),
            ("-J/--ask-vault-pass", "ask_vault_pass", None, "Vault password: ")):
        if not getattr(args, asked, False):
            continue
        if field is not None and getattr(conn, field) is not None:
            raise UserError(f"{flag} and --{field.replace('_', '-')}: give one")
        path = run_options.asked_secret(flag, prompt)
        if field is None:
            conn = dataclasses.replace(
                conn, vault_password_files=(*conn.vault_password_files, path))
        elif field == "become_password_file":
            conn = dataclasses.replace(conn, become_password_file=path)
        else:
            conn = dataclasses.replace(conn, connection_password_file=path)
    args._connection = conn
    return conn


def forks(args: argparse.Namespace) -> int | None:
    return run_options.forks(args.forks)


def check_choices(args: argparse.Namespace) -> None:
    """Choices given through the environment bypass argparse; check them the same way."""
    run_options.check_choices(args.strategy, args.ansible_profile)


def run_spec(args: argparse.Namespace, playbook: Path, inventory: Inventory) -> RunSpec:
    return run_options.run_spec(of(args), playbook, inventory)
