# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Parse what the driver stack reports about itself: `ofed_info -s`, package queries, and the
version inside an MLNX_OFED bundle's file name. Pure functions: the unit tests feed them real
output, the rdma_ofed role reaches them through the filters in plugins/filter/driver.py."""

from __future__ import annotations

import re

# `ofed_info -s` prints one line such as:
#   MLNX_OFED_LINUX-23.10-1.1.9.0:   (MLNX_OFED tarball / ISO install)
#   OFED-internal-24.10-1.1.4:       (DOCA-OFED, doca-ofed packages)
#   OFED-4.8-2:                      (OpenFabrics OFED)
_OFED_INFO = re.compile(r"^(?P<flavor>[A-Za-z][\w-]*?)-(?P<version>\d+\.\d+-\d+(?:\.\d+)*)\s*:?\s*$")

# MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64.tgz, MLNX_OFED_LINUX-5.8-3.0.7.0-rhel8.6-x86_64.iso
_BUNDLE = re.compile(
    r"^MLNX_OFED_LINUX-(?P<version>\d+\.\d+-\d+(?:\.\d+)*)-(?P<distro>[^-/]+)-"
    r"(?P<arch>x86_64|aarch64|ppc64le|arm64)\.(?P<ext>tgz|tar\.gz|iso)$"
)


def parse_ofed_info(text: str | None) -> dict | None:
    """`ofed_info -s` output → {"flavor", "version", "full"}; None when nothing matches."""
    for line in reversed((text or "").splitlines()):
        m = _OFED_INFO.match(line.strip())
        if m:
            return {
                "flavor": m.group("flavor"),
                "version": m.group("version"),
                "full": f"{m.group('flavor')}-{m.group('version')}",
            }
    return None


def parse_package_query(text: str | None) -> dict[str, str]:
    """Installed packages → {name: version} from tab-separated `name<TAB>version<TAB>status`.

    The role asks dpkg-query for `${Package}\\t${Version}\\t${db:Status-Abbrev}` and rpm for
    `%{NAME}\\t%{VERSION}-%{RELEASE}\\tii`, so both read alike. dpkg keeps a record of removed
    packages whose configuration remains (status `rc`): those are not installed. Lines that are
    not records (rpm's "package X is not installed") are skipped.
    """
    found: dict[str, str] = {}
    for line in (text or "").splitlines():
        fields = line.split("\t")
        if len(fields) < 3:
            continue
        name, version, status = fields[0].strip(), fields[1].strip(), fields[2].strip()
        # dpkg's abbreviation: desired state, then current state; "ii"/"hi" mean installed.
        if name and version and len(status) >= 2 and status[1] == "i":
            found[name.split(":")[0]] = version
    return found


def parse_bundle_name(name: str) -> dict | None:
    """An MLNX_OFED bundle's file name → {"version", "distro", "arch", "ext", "stem"} or None."""
    base = name.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    m = _BUNDLE.match(base)
    if not m:
        return None
    ext = m.group("ext")
    return {
        "version": m.group("version"),
        "distro": m.group("distro"),
        "arch": m.group("arch"),
        "ext": ext,
        "stem": base[: -(len(ext) + 1)],
    }


def package_plan(wanted: list[str], installed: dict[str, str], version: str = "",
                 pinned: list[str] | None = None, pin_sep: str = "=") -> dict:
    """Decide what an inbox install must do.

    wanted: package names; installed: parse_package_query() result; version: the rdma-core
    version to pin ("" = any); pinned: the packages built from rdma-core, which carry that
    version. Returns {"missing", "wrong_version", "install" (names with pins), "ok"}.
    """
    pinned_set = set(pinned or [])
    missing, wrong, install = [], [], []
    for name in wanted:
        pin = version if (version and name in pinned_set) else ""
        have = installed.get(name)
        spec = f"{name}{pin_sep}{pin}" if pin else name
        if have is None:
            missing.append(name)
            install.append(spec)
        elif pin and not _same_version(have, pin):
            wrong.append({"name": name, "installed": have, "wanted": pin})
            install.append(spec)
    return {"missing": missing, "wrong_version": wrong, "install": install,
            "ok": not install}


def _same_version(have: str, want: str) -> bool:
    """"44.0-2" matches "44.0-2"; a pin without a release ("44.0") matches any release of it.
    An epoch that the pin does not name is ignored."""
    if ":" in have and ":" not in want:
        have = have.split(":", 1)[1]
    return have == want or have.startswith(want + "-") or have.startswith(want + ".el")


def ofed_plan(installed: dict | None, wanted_version: str) -> dict:
    """MLNX_OFED: install unless the installed `ofed_info -s` version is the wanted one."""
    have = installed["version"] if installed else None
    return {"installed": have, "wanted": wanted_version,
            "install": have != wanted_version}


def stack_report(source: str, packages: list[str], plan: dict, mlnx_plan: dict,
                 before: dict, after: dict | None = None, after_plan: dict | None = None,
                 check: bool = False) -> str:
    """The rdma_ofed role's report line: the state the host is left in, and what this run did
    to get there (under --check: what it would do).

    plan, mlnx_plan: package_plan() and ofed_plan() of the probe before the run. before, after:
    {"versions": parse_package_query(), "ofed": parse_ofed_info()} of the probe before the run
    and of the one after an install (None: nothing was installed, the probe's state stands);
    after_plan: package_plan() of after.
    """
    after = after or before
    after_plan = after_plan or plan
    found, now = before.get("ofed"), after.get("ofed")
    if source == "mlnx_ofed":
        text = f"{(now or {}).get('full') or 'no MLNX_OFED'} installed, wanted {mlnx_plan['wanted']}"
        if mlnx_plan["install"]:
            text += ("; would install it" if check else
                     f"; installed by this run (before: {found['full'] if found else 'none'})")
        return f"{source}: {text}"
    versions = after.get("versions") or {}
    parts = [f"{len(versions)}/{len(packages)} packages installed"
             + (f" (rdma-core {versions['rdma-core']})" if "rdma-core" in versions else "")]
    if after_plan["missing"]:
        parts.append("missing " + ", ".join(after_plan["missing"]))
    if after_plan["wrong_version"]:
        parts.append("other versions: " + ", ".join(w["name"] for w in after_plan["wrong_version"]))
    if found:
        parts.append(f"ofed_info: {found['full']}")
    if plan["ok"]:
        parts.append("nothing to do")
    elif check:
        parts.append("would install " + ", ".join(plan["install"]))
    else:
        parts.append("installed by this run: " + ", ".join(plan["install"])
                     + f" (before: {len(before.get('versions') or {})}/{len(packages)})")
    return f"{source}: " + "; ".join(parts)
