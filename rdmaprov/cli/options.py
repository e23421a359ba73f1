"""The option group every playbook-running command shares (bootstrap, reconfigure, validate).

``add_run_options(parser)`` adds the options; ``run_spec(args, playbook, inventory)`` turns the
parsed namespace into an engine RunSpec, reading the environment variables named in the help
and raising UserError (exit 1) for a bad value.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rdmaprov import settings
from rdmaprov.engine import RunSpec
from rdmaprov.errors import UserError
from rdmaprov.inventory import Inventory

EXIT_CODES_EPILOG = """\
exit codes:
  0  every host ok (changes allowed)
  1  usage or input error: bad flag, inventory, variable or missing file; no host contacted
  2  some host failed or was unreachable (the summary names each, with its task and message)
"""

MAX_FORKS_OPTION = 1000


def _csv(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("run options (shared by bootstrap, reconfigure, validate)")
    g.add_argument("--check", action="store_true",
                   help="dry run: report what would change, change nothing")
    g.add_argument("--diff", action="store_true",
                   help="show the changes to files and settings (with --check: the drift)")
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
    g.add_argument("-v", "--verbose", action="count", default=0,
                   help="one progress line per host and task where there is no terminal (else one "
                        "per task), and more Ansible detail in the kept artifacts (repeat for "
                        "more)")


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


def forks(args: argparse.Namespace) -> int | None:
    raw = args.forks
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


def check_choices(args: argparse.Namespace) -> None:
    """Choices given through the environment bypass argparse; check them the same way."""
    for opt, env, allowed in (("--strategy", "RDMAPROV_STRATEGY", settings.STRATEGIES),
                              ("--ansible-profile", "RDMAPROV_ANSIBLE_PROFILE",
                               settings.PROFILES)):
        value = getattr(args, opt.lstrip("-").replace("-", "_"))
        if value not in allowed:
            raise UserError(f"{opt}/{env}: {value!r} is not one of {', '.join(allowed)}")


def run_spec(args: argparse.Namespace, playbook: Path, inventory: Inventory) -> RunSpec:
    check_choices(args)
    return RunSpec(
        playbook=playbook,
        inventory=inventory.path,
        extravars=inventory.extravars,
        user_vars=frozenset(inventory.extravars),  # -e/--set: redacted from kept artifacts
        limit=args.limit,
        tags=_csv(args.tags),
        skip_tags=_csv(args.skip_tags),
        forks=forks(args),
        host_count=len(inventory.selected),
        check=args.check,
        diff=args.diff,
        verbosity=args.verbose,
        keep_artifacts=args.keep_artifacts,
        profile=args.ansible_profile,
        # 'auto' settled here, for this playbook; the run's summary names the strategy.
        strategy=settings.resolve_strategy(args.strategy, playbook.name,
                                          len(inventory.selected)),
    )
