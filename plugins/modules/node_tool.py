#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_tool
short_description: The node-side rdmaprov (check, probe, explain) in a venv, on PATH
description:
  - Reads the node (its python3's version and what it can import, the venv's pyvenv.cfg, the
    checksum of every file of O(manifest) in the venv's site-packages, files there the manifest
    lacks, the launcher) and plans what it lacks (module_utils/node_tool.py C(plan)).
  - With O(apply) (and not in check mode) it makes the venv with the node's own python3
    (C(--without-pip --system-site-packages), so no pip and no index), writes the files that differ from
    O(archive), removes stale ones and writes the launcher (C(launcher) of O(settings)).
  - Then proves the install as it is now, in check mode too, by importing check, probe and
    explain with the venv's python (and, after a change, running the launcher's C(--version)).
  - The action plugin of the same name fills O(settings) from the node_tool role's variables,
    builds O(manifest) and O(archive) from the controller's installed rdmaprov and installs the
    distribution's packages the plan names.
version_added: "0.2.0"
author: rdmaprov developers (!UNKNOWN)
options:
  settings:
    description: "C(install), C(venv) and C(launcher), as the role's node_tool_* variables."
    type: dict
    required: true
  manifest:
    description: "The files, C({path in site-packages: sha256}); empty where the controller has no rdmaprov."
    type: dict
    default: {}
  archive:
    description: A tar on the node holding the files of the plan's C(write) (the action sends it).
    type: str
    default: ""
  apply:
    description: Make the changes the plan lists (false only reads and plans).
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - rdmaprov.cluster.attributes
  - rdmaprov.cluster.attributes.action
"""

EXAMPLES = r"""
- name: Install the node-side rdmaprov
  rdmaprov.cluster.node_tool:
    settings: {}
"""

RETURN = r"""
plan:
  description: module_utils/node_tool.py plan()'s answer (not_applicable, packages, create_venv, write, remove, launcher, drift).
  returned: always
  type: dict
version:
  description: What the installed rdmaprov says it is (C(rdmaprov 0.1.0)), empty where it is not installed.
  returned: always
  type: str
rdmaprov_report:
  description: The host's lines.
  returned: always
  type: list
  elements: str
"""

import json
import os
import tarfile
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rdmaprov.cluster.plugins.module_utils import node_tool

PROBE = ("import importlib.util, json, sys; print(json.dumps([list(sys.version_info[:2]), "
         "[m for m in %r if importlib.util.find_spec(m) is None]]))" % (node_tool.MODULES,))
# What check, probe and explain import: a module that cannot load fails here, not in a prolog.
PROVE = ("import rdmaprov, rdmaprov.cli.check, rdmaprov.cli.probe, rdmaprov.cli.explain, yaml; "
         "from rdmaprov.collection import kernel_caps; print('rdmaprov', rdmaprov.__version__)")


def _read(path, mode="r"):
    try:
        with open(path, mode) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _venv_version(venv):
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        return None
    for line in (_read(os.path.join(venv, "pyvenv.cfg")) or "").splitlines():
        key, _sep, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            parts = value.strip().split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                return [int(parts[0]), int(parts[1])]
    return None


def _probe(module, python, settings, manifest):
    out = {"python": None, "missing_modules": [], "family": "", "venv_version": None,
           "installed": {}, "extra": [], "launcher": None, "launcher_mode": None}
    if python:
        rc, stdout, err = module.run_command([python, "-I", "-c", PROBE])
        if rc != 0:
            module.fail_json(msg="%s cannot run: %s" % (python, " ".join((err or stdout).split())))
        out["python"], out["missing_modules"] = json.loads(stdout)
    out["family"] = node_tool.family(_read("/etc/os-release") or "")
    venv = settings["venv"]
    out["venv_version"] = _venv_version(venv)
    version = out["venv_version"] or out["python"]
    if version:
        site = node_tool.site_packages(venv, version)
        for rel in manifest:
            data = _read(os.path.join(site, rel), "rb")
            if data is not None:
                out["installed"][rel] = node_tool.sha256(data)
        top = os.path.join(site, node_tool.PACKAGE)
        if os.path.isdir(top):
            out["extra"] = ["%s/%s" % (node_tool.PACKAGE, rel) for rel in node_tool._walk(top)
                            if "%s/%s" % (node_tool.PACKAGE, rel) not in manifest]
    out["launcher"] = _read(settings["launcher"])
    if out["launcher"] is not None:
        out["launcher_mode"] = os.stat(settings["launcher"]).st_mode & 0o7777
    return out


def _write(path, data, mode):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".rdmaprov-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _apply(module, python, settings, manifest, plan, archive):
    venv = settings["venv"]
    if plan["create_venv"]:
        argv = [python, "-m", "venv", "--without-pip", "--system-site-packages"]
        argv += ["--clear"] if os.path.exists(venv) else []
        rc, out, err = module.run_command(argv + [venv])
        if rc != 0:
            module.fail_json(msg="%s failed: %s" % (" ".join(argv + [venv]),
                                                    " ".join((err or out).split())), plan=plan)
    site = node_tool.site_packages(venv, _venv_version(venv) or [0, 0])
    if plan["write"]:
        if not archive:
            module.fail_json(msg="node_tool: files to write but no archive (run it through its "
                             "action plugin: rdmaprov.cluster.node_tool)", plan=plan)
        with tarfile.open(archive) as tar:
            for rel in plan["write"]:
                member = tar.extractfile(rel)
                data = member.read() if member else b""
                if node_tool.sha256(data) != manifest[rel]:
                    module.fail_json(msg="node_tool: %s in the archive is not the manifest's" % rel,
                                     plan=plan)
                _write(os.path.join(site, rel), data, 0o644)
    for rel in plan["remove"]:
        os.unlink(os.path.join(site, rel))
    if plan["launcher"]:
        _write(settings["launcher"], node_tool.launcher(venv).encode(), 0o755)


def _prove(module, settings, ran_launcher):
    """The installed rdmaprov's own answer: its commands import, the launcher runs."""
    python = os.path.join(settings["venv"], "bin", "python")
    rc, out, err = module.run_command([python, "-I", "-B", "-c", PROVE])
    if rc != 0:
        return "", "the installed rdmaprov does not load: %s" % " ".join((err or out).split()[-30:])
    version = out.strip()
    if ran_launcher:
        rc, out, err = module.run_command([settings["launcher"], "--version"])
        if rc != 0 or out.strip() != version:
            return version, "%s --version: exit %d: %s" % (settings["launcher"], rc,
                                                           " ".join((err or out).split()))
    return version, ""


def main():
    module = AnsibleModule(
        argument_spec={
            "settings": {"type": "dict", "required": True},
            "manifest": {"type": "dict", "default": {}},
            "archive": {"type": "str", "default": ""},
            "apply": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    settings = dict({"install": True, "venv": "/opt/rdmaprov/venv",
                     "launcher": "/usr/local/bin/rdmaprov"}, **module.params["settings"])
    manifest = module.params["manifest"]
    python = module.get_bin_path("python3")
    plan = node_tool.plan(settings, _probe(module, python, settings, manifest), manifest)
    if plan["not_applicable"]:
        module.exit_json(changed=False, plan=plan, version="", rdmaprov_report=plan["report"])
    done = False
    if plan["drift"] and module.params["apply"] and not module.check_mode:
        if plan["packages"]:
            module.fail_json(msg="python3 still cannot import what rdmaprov needs after "
                             "installing %s" % " ".join(plan["packages"]), plan=plan)
        _apply(module, python, settings, manifest, plan, module.params["archive"])
        done = True
    version, failure = ("", "") if plan["drift"] and not done else _prove(module, settings, done)
    report = node_tool.report(settings, plan, version, done)
    if failure:
        module.fail_json(msg=failure, plan=plan, version=version, rdmaprov_report=report)
    module.exit_json(changed=plan["drift"], plan=plan, version=version, rdmaprov_report=report)


if __name__ == "__main__":
    main()
