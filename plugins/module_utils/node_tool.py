# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The node_tool role's rules (module node_tool, its action plugin): which files make the
node-side rdmaprov (check, probe, explain), where they go in the node's venv, and what a node
lacks of them, read from the node's own files.

The controller's installed rdmaprov is the source: its Python package, and of its collection
only galaxy.yml and plugins/module_utils (what ``rdmaprov.collection`` mounts; the roles,
playbooks and other plugins run on the controller). On the node they go into a venv's
site-packages as a wheel lays them out (``rdmaprov/_collection``). The venv is made by the node's
own python3 with ``--without-pip`` (nothing is installed with pip: no wheel, no index) and
``--system-site-packages``, since what the commands import beyond the standard library (PyYAML
for check.yml, rich for probe's and explain's tables, pyverbs where rdma-core ships it) is the
distribution's packages, installed from the node's own package source.
"""

from __future__ import annotations

import hashlib
import os
import posixpath

# The plan's settings, each the role variable node_tool_<key> (role_settings.fill).
SETTINGS = ("install", "venv", "launcher")

# rdmaprov's requires-python (pyproject.toml).
MIN_PYTHON = (3, 11)

# What the commands import beyond the standard library -> the distribution's package for it.
MODULES = ("yaml", "rich")
PACKAGES = {
    "debian": {"yaml": "python3-yaml", "rich": "python3-rich"},
    "rhel": {"yaml": "python3-pyyaml", "rich": "python3-rich"},
}

PACKAGE = "rdmaprov"
BUNDLED = "rdmaprov/_collection"


def _walk(top, skip=()):
    """Relative paths of the regular files below ``top``, sorted; no caches, no ``skip`` dirs."""
    found = []
    for here, dirs, files in os.walk(top):
        rel_here = os.path.relpath(here, top)
        dirs[:] = sorted(d for d in dirs if d != "__pycache__"
                         and os.path.normpath(os.path.join(rel_here, d)) not in skip)
        for name in files:
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(here, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found.append(os.path.normpath(os.path.join(rel_here, name)).replace(os.sep, "/"))
    return sorted(found)


def package_beside(collection_root):
    """The rdmaprov package that carries the collection at ``collection_root``: its parent in a
    wheel (``rdmaprov/_collection``), its ``rdmaprov/`` in a source checkout; None for a
    collection installed alone (its tarball has no Python package)."""
    for package in (os.path.dirname(collection_root), os.path.join(collection_root, PACKAGE)):
        if (os.path.basename(package) == PACKAGE
                and os.path.isfile(os.path.join(package, "__init__.py"))
                and os.path.isfile(os.path.join(collection_root, "galaxy.yml"))):
            return package
    return None


def source_files(package_dir, collection_root):
    """{path in site-packages: path on the controller} of the node-side rdmaprov: the package
    (less a bundled collection: its parts are taken below) and the collection's galaxy.yml and
    plugins/module_utils."""
    out = {}
    for rel in _walk(package_dir, skip=("_collection",)):
        out["%s/%s" % (PACKAGE, rel)] = os.path.join(package_dir, rel)
    out["%s/galaxy.yml" % BUNDLED] = os.path.join(collection_root, "galaxy.yml")
    utils = os.path.join(collection_root, "plugins", "module_utils")
    for rel in _walk(utils):
        out["%s/plugins/module_utils/%s" % (BUNDLED, rel)] = os.path.join(utils, rel)
    return out


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def site_packages(venv, version):
    """The venv's site-packages for a python of ``version`` (major, minor)."""
    return posixpath.join(venv, "lib", "python%d.%d" % tuple(version[:2]), "site-packages")


def launcher(venv):
    """/usr/local/bin/rdmaprov: the venv's python, isolated (-I: no current directory, no
    PYTHON* variables on sys.path when a prolog runs it as root)."""
    return ('#!/bin/sh\n# rdmaprov on this node (the node_tool role): its venv is %s\n'
            'exec %s -I -m rdmaprov "$@"\n' % (venv, posixpath.join(venv, "bin", "python")))


def family(os_release):
    """'debian', 'rhel' or '' from /etc/os-release's text (ID and ID_LIKE)."""
    words = []
    for line in os_release.splitlines():
        key, _sep, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            words += value.strip().strip("\"'").split()
    if any(w in ("debian", "ubuntu") for w in words):
        return "debian"
    if any(w in ("rhel", "fedora", "centos") for w in words):
        return "rhel"
    return ""


def plan(settings, probe, manifest):
    """What this node lacks of the node-side rdmaprov.

    ``probe`` (the module reads it on the node): ``python`` [major, minor] of the node's python3
    or None, ``missing_modules`` (of MODULES, what it cannot import), ``family`` (family()),
    ``venv_version`` (pyvenv.cfg's [major, minor], None without a usable venv), ``installed``
    ({path: sha256} of the manifest's files that are there), ``extra`` (files under the venv's
    rdmaprov/ that the manifest lacks), ``launcher`` (its text or None) and ``launcher_mode``.
    ``manifest``: {path in site-packages: sha256} of the controller's files.

    Returns ``not_applicable`` (why nothing can be done here, or ''), ``packages`` (to install,
    by the ``family``'s package manager),
    ``create_venv``, ``write``, ``remove``, ``launcher`` (to write), ``drift`` and ``report``.
    """
    out = {"not_applicable": "", "packages": [], "family": "", "create_venv": False, "write": [],
           "remove": [], "launcher": False, "drift": False, "report": []}
    if not settings.get("install", True):
        out["not_applicable"] = "node_tool_install is false"
    elif not manifest:
        out["not_applicable"] = ("this controller has no rdmaprov Python package (the collection "
                                 "alone does not carry it): install rdmaprov on the controller")
    elif not probe.get("python"):
        out["not_applicable"] = "this node has no python3"
    elif tuple(probe["python"][:2]) < MIN_PYTHON:
        out["not_applicable"] = ("this node's python3 is %d.%d; rdmaprov needs %d.%d or later"
                                 % (tuple(probe["python"][:2]) + MIN_PYTHON))
    if out["not_applicable"]:
        out["report"] = ["rdmaprov on this node: not applicable: %s" % out["not_applicable"]]
        return out
    missing = list(probe.get("missing_modules") or [])
    names = PACKAGES.get(probe.get("family") or "")
    if missing and not names:
        out["not_applicable"] = ("this node's python3 cannot import %s, and this OS family has "
                                 "no package known for it" % ", ".join(missing))
        out["report"] = ["rdmaprov on this node: not applicable: %s" % out["not_applicable"]]
        return out
    out["packages"] = [names[m] for m in missing] if names else []
    out["family"] = probe.get("family") or ""
    venv_version = probe.get("venv_version")
    out["create_venv"] = not venv_version or list(venv_version[:2]) != list(probe["python"][:2])
    installed = {} if out["create_venv"] else dict(probe.get("installed") or {})
    out["write"] = sorted(p for p, digest in manifest.items() if installed.get(p) != digest)
    out["remove"] = [] if out["create_venv"] else sorted(probe.get("extra") or [])
    out["launcher"] = (probe.get("launcher") != launcher(settings["venv"])
                       or probe.get("launcher_mode") != 0o755)
    out["drift"] = bool(out["packages"] or out["create_venv"] or out["write"] or out["remove"]
                        or out["launcher"])
    return out


def report(settings, result_plan, version_line, done):
    """The host's lines: what was (``done``) or would be done, then the command's own answer."""
    p = result_plan
    lines = []
    if p["drift"]:
        verb = "" if done else "would be "
        what = []
        if p["packages"]:
            what.append("%sinstalled: %s" % (verb, " ".join(p["packages"])))
        if p["create_venv"]:
            what.append("venv %s %smade" % (settings["venv"], verb))
        if p["write"]:
            what.append("%d file(s) %swritten" % (len(p["write"]), verb))
        if p["remove"]:
            what.append("%d stale file(s) %sremoved" % (len(p["remove"]), verb))
        if p["launcher"]:
            what.append("%s %swritten" % (settings["launcher"], verb))
        lines.append("rdmaprov on this node: " + "; ".join(what))
    if version_line:
        lines.append("%s: %s (venv %s)" % (settings["launcher"], version_line, settings["venv"]))
    return lines
