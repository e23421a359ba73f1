"""Known NCCL bugs and the release that fixed them, as data: each entry quotes NCCL's own
release notes (the commit message of the release in github.com/NVIDIA/nccl) and names the
threads where the symptom was seen. The rules table (rules.py) states the fix from here, so
"fixed in 2.x.y: upgrade" has one source.

Only entries whose fix a release note states are listed; a symptom whose fix no release
carries yet is not "fixed in" anything.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fix:
    key: str
    fixed_in: str  # the first release with the fix
    note: str  # the release note's words
    threads: tuple[str, ...]  # where the symptom was reported
    source: str  # the release's notes


RELEASES = "https://github.com/NVIDIA/nccl/releases/tag/"

FIXES: dict[str, Fix] = {f.key: f for f in (
    # 2.25.1 asked for more shared memory than consumer Blackwell (RTX 50xx, sm_120) has and
    # logged "ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856" at INFO.
    Fix("blackwell_shared_mem", "2.26.2",
        "Fix shared memory usage on recent Blackwell GPUs",
        ("https://github.com/NVIDIA/nccl/issues/1637",
         "https://github.com/NVIDIA/nccl-tests/issues/287"),
        RELEASES + "v2.26.2-1"),
    # 2.23-2.25 warned "failed to IPC/NET register userbuff" whenever an opportunistic user
    # buffer registration did not apply; kiskra-nvidia on nccl#1684: "generally harmless".
    Fix("userbuff_register_warn", "2.26.2",
        "Make user buffer registration problems print an INFO instead of a WARN",
        ("https://github.com/NVIDIA/nccl/issues/1684",),
        RELEASES + "v2.26.2-1"),
    # A client that connected to a bootstrap socket and closed before sending the 8-byte
    # magic failed the bootstrap (nccl#1612, e.g. a security scan).
    Fix("bootstrap_short_magic", "2.27.3",
        "accept() will retry also if just reading the magic failed (Issue #1613)",
        ("https://github.com/NVIDIA/nccl/issues/1612",),
        RELEASES + "v2.27.3-1"),
)}


def version_tuple(v: str | None) -> tuple[int, ...] | None:
    """"2.25.1" (or "2.25.1+cuda12.8") as (2, 25, 1); None when it is not a version."""
    if not v:
        return None
    head = v.split("+", 1)[0].split("-", 1)[0]
    try:
        return tuple(int(p) for p in head.split("."))
    except ValueError:
        return None


def has_fix(key: str, version: str | None) -> bool | None:
    """Whether NCCL ``version`` carries the fix; None when the version is unknown."""
    have = version_tuple(version)
    return None if have is None else have >= (version_tuple(FIXES[key].fixed_in) or ())


def fixed_text(key: str) -> str:
    """The "fixed in 2.x.y: upgrade" sentence of an entry, with the release note quoted."""
    f = FIXES[key]
    return (f"A known NCCL bug, fixed in NCCL {f.fixed_in} (release notes: \"{f.note}\"): "
            f"upgrade to NCCL {f.fixed_in} or later.")
