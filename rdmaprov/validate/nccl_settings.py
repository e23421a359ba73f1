"""What NCCL applied next to what nccl_env intended, per setting: the proof that a job's
container (started with the RDMA CDI device, which mounts the host's /etc/nccl.conf) runs with
the host's NCCL settings. The applied side comes from NCCL's own log
(rdmaprov.parsers.nccl_log.applied_settings), the intended side from the host's nccl.conf
(cdi_spec.settings_of reads it the way NCCL does)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
LAUNCH_OWN = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"})


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
