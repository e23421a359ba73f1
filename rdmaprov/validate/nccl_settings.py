"""What NCCL applied next to what nccl_env intended, per setting: the proof that a job's
container (started with the RDMA CDI device, which mounts the host's /etc/nccl.conf) runs with
the host's NCCL settings. The applied side comes from NCCL's own log
(rdmaprov.parsers.nccl_log.applied_settings), the intended side from the host's nccl.conf
(cdi_spec.settings_of reads it the way NCCL does)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rdmaprov import collection

AS_INTENDED = "as intended"
MISMATCH = "mismatch"
NOT_LOGGED = "not logged"      # intended, but NCCL did not say it read it (not proof of a miss)
NOT_INTENDED = "not intended"  # NCCL took it from elsewhere (the job's env, the image)


@dataclass(frozen=True)
class SettingCheck:
    name: str
    intended: str | None
    applied: str | None
    state: str

    def line(self) -> str:
        if self.state == MISMATCH:
            return (f"{self.name}: NCCL applied {self.applied!r}, nccl_env intended "
                    f"{self.intended!r}")
        if self.state == NOT_LOGGED:
            return f"{self.name}: intended {self.intended!r}, not in NCCL's log"
        if self.state == NOT_INTENDED:
            return f"{self.name}: NCCL applied {self.applied!r} (not from nccl_env)"
        return f"{self.name}={self.applied} (as intended)"


# The validation sets NCCL's log level for its own proof (validate_launch.worker_env): a job's
# NCCL_DEBUG from nccl.conf differing there says nothing about the job's path.
LAUNCH_OWN: frozenset[str] = collection.validate_launch.LAUNCH_OWN
ENVIRONMENT = "environment"


def worker_applied(seen: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """{NAME: {"value", "from"}}, sorted: the NCCL settings a worker gave NCCL, from what it
    recorded (worker_preflight.nccl_seen: its NCCL_* environment and the text of each file NCCL
    reads, in NCCL's order), by NCCL's rule: a variable set earlier is kept ("from":
    "environment" or the file's path). {} without a record."""
    if not isinstance(seen, Mapping):
        return {}
    out: dict[str, dict[str, str]] = {}
    env = seen.get("env")
    for name, value in (env.items() if isinstance(env, Mapping) else ()):
        if str(name).startswith("NCCL_"):
            out[str(name)] = {"value": str(value), "from": ENVIRONMENT}
    files = seen.get("files")
    for entry in files if isinstance(files, list) else ():
        if not (isinstance(entry, list | tuple) and len(entry) == 2
                and isinstance(entry[1], str)):
            continue
        for name, value in collection.cdi_spec.settings_of(entry[1]).items():
            if name.startswith("NCCL_"):
                out.setdefault(name, {"value": value, "from": str(entry[0])})
    return dict(sorted(out.items()))


def off_job_path(applied: Mapping[str, Mapping[str, str]], job: Mapping[str, str],
                 launch_env: Iterable[str] | None) -> list[str]:
    """What made a worker's NCCL settings differ from a job's, one clause each: the settings it
    took from its environment that the launch set (``launch_env``: the names the engine was
    told to pass, argv.txt's --env; None: every one, as on the host runtime) against ``job``,
    the host's nccl.conf a job's container gets (validate_launch.job_path_differences, the
    rule the launch's own refusal applies)."""
    names = None if launch_env is None else set(launch_env)
    added = {k: v["value"] for k, v in applied.items()
             if v.get("from") == ENVIRONMENT and (names is None or k in names)}
    return [f"{name}={want} (the launch's environment), a job's container: "
            + (f"{name}={have} (the host's nccl.conf)" if have is not None
               else f"no {name} (the host's nccl.conf has none)")
            for name, want, have in collection.validate_launch.job_path_differences(added, job)]


def compare(intended: Mapping[str, str], applied: Mapping[str, str]) -> list[SettingCheck]:
    """One row per NCCL_* setting either side names, intended ones first (sorted); the
    validation's own log settings (LAUNCH_OWN) are left out."""
    intended = {k: v for k, v in intended.items() if k not in LAUNCH_OWN}
    applied = {k: v for k, v in applied.items() if k not in LAUNCH_OWN}
    out = []
    for name in sorted(k for k in intended if k.startswith("NCCL_")):
        want, got = str(intended[name]).strip(), applied.get(name)
        state = (NOT_LOGGED if got is None
                 else AS_INTENDED if got.strip() == want else MISMATCH)
        out.append(SettingCheck(name, want, got, state))
    out += [SettingCheck(name, None, applied[name], NOT_INTENDED)
            for name in sorted(applied) if name not in intended]
    return out


def mismatches(checks: Iterable[SettingCheck]) -> list[str]:
    """The lines that fail a host: a setting NCCL applied with another value than intended."""
    return [c.line() for c in checks if c.state == MISMATCH]
