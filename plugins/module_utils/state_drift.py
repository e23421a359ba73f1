# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Where a host's files and systemd units differ from what the control host wants.

The roles' probe modules read the files a role writes and the units it enables (``read``, on the
node); a role's plan compares them with the files it renders itself (``compare``: roce_qos,
firewall, net_mtu), or the control host renders the templates the install tasks write and
compares through the state_drift filter. An empty answer means those files and units need
no task; any difference sends the role through its install/configure/verify tasks, which then
report the exact change (with --diff) or make it.
"""
from __future__ import annotations

import grp
import hashlib
import os
import pwd
import shutil
import subprocess

PATHS_SPEC = {"type": "list", "elements": "str", "default": []}
# The header line of the files a role's plan renders in Python: ansible-core's default
# ansible_managed, which the roles' templates wrote before, so those files compare equal.
MANAGED = "Ansible managed"


def header(managed: str, tail: str = "") -> str:
    """The managed-file header of a file a plan renders, as comment lines: each line of
    ``managed`` (the play's ansible_managed, which an inventory may set to several lines) after
    C(# ), ``tail`` after the last; a character that is not printable becomes C(?). So that no
    text of it is read as a shell command, a unit directive or YAML, whatever it holds: for a
    one-line value the line C(# <managed><tail>), as the roles always wrote it."""
    lines = [("".join(c if c.isprintable() or c == "\t" else "?" for c in line))
             for line in str(managed or MANAGED).splitlines()] or [""]
    lines[-1] += tail
    return "\n".join(("# " + line).rstrip() if line else "#" for line in lines)


def sha1(data: bytes) -> str:
    """The checksum Ansible's own file modules compare with."""
    return hashlib.sha1(data).hexdigest()  # nosec B324: a content comparison, not security


def _name(lookup, ident: int) -> str:
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def read_files(paths: list[str]) -> dict[str, dict]:
    """path -> {exists, sha1, mode, owner, group}; read-only."""
    out: dict[str, dict] = {}
    for path in paths or []:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            st = os.stat(path)
        except FileNotFoundError:
            out[path] = {"exists": False}
            continue
        except OSError as exc:
            out[path] = {"exists": True, "error": exc.strerror or str(exc)}
            continue
        out[path] = {"exists": True, "sha1": sha1(data), "mode": f"{st.st_mode & 0o7777:04o}",
                     "owner": _name(pwd.getpwuid, st.st_uid),
                     "group": _name(grp.getgrgid, st.st_gid)}
    return out


def read_units(units: list[str]) -> dict[str, str]:
    """unit -> `systemctl is-enabled` answer ('enabled', 'disabled', 'not-found', ...)."""
    if not units:
        return {}
    if not shutil.which("systemctl"):
        return dict.fromkeys(units, "no systemctl")
    out = {}
    for unit in units:
        proc = subprocess.run(["systemctl", "is-enabled", unit], capture_output=True, text=True,
                              check=False, env={**os.environ, "LC_ALL": "C"})
        out[unit] = proc.stdout.strip() or proc.stderr.strip() or f"exit {proc.returncode}"
    return out


def compare(file_state: dict, unit_state: dict, files: list[dict], units: list[str]) -> list[str]:
    """One line per wanted file ({path, content, mode?, owner?, group?}) or unit that differs."""
    out = []
    for f in files or []:
        path = f["path"]
        seen = (file_state or {}).get(path)
        if seen is None:
            out.append(f"{path}: not probed")
        elif not seen.get("exists"):
            out.append(f"{path}: absent")
        elif seen.get("error"):
            out.append(f"{path}: unreadable: {seen['error']}")
        else:
            if seen["sha1"] != sha1(str(f["content"]).encode("utf-8")):
                out.append(f"{path}: content differs")
            for key in ("mode", "owner", "group"):
                want = f.get(key)
                if want and str(seen.get(key)) != str(want).zfill(4 if key == "mode" else 0):
                    out.append(f"{path}: {key} {seen.get(key)}, wanted {want}")
    for unit in units or []:
        state = (unit_state or {}).get(unit, "not probed")
        if state != "enabled":
            out.append(f"{unit}: {state}, wanted enabled")
    return out
