# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The node_tool action (module doc: plugins/modules/node_tool.py): O(settings) filled from the
node_tool role's variables (role_settings.py; the table is node_tool.SETTINGS), O(manifest) from
the controller's installed rdmaprov (module_utils/node_tool.py source_files), then the module
reads the node and plans; where the node lacks something, the distribution's packages the plan
names go in through ansible.builtin.package (from the node's own package source), and the module
runs again with the files that differ sent as one tar. A node in line costs one module call."""

from __future__ import annotations

import io
import os
import tarfile

from ansible.errors import AnsibleActionFail

from ansible_collections.rdmaprov.cluster.plugins.module_utils import node_tool
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import builtin_step, role_settings

MODULE = "rdmaprov.cluster.node_tool"
# The controller's files, read once per process (every host gets the same).
_SOURCE: dict = {}


def controller_source():
    """(package dir, collection root) of the node-side rdmaprov: the package that carries the
    collection this action runs from, else the controller Python's rdmaprov (a collection
    installed alone beside an installed rdmaprov); None where neither is there."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    package = node_tool.package_beside(here)
    if package:
        return package, here
    try:
        import rdmaprov
        from rdmaprov.resources import collection_root
    except ImportError:
        return None
    return rdmaprov.__path__[0], str(collection_root())


def controller_files():
    """{path in site-packages: bytes} of the node-side rdmaprov (controller_source()); {} where
    this controller has none."""
    if "files" not in _SOURCE:
        source = controller_source()
        files = {}
        for rel, path in (node_tool.source_files(*source).items() if source else ()):
            with open(path, "rb") as handle:
                files[rel] = handle.read()
        _SOURCE["files"] = files
    return _SOURCE["files"]


def archive(files, names):
    """A tar of ``names`` (reproducible: no times, no owners)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    return buf.getvalue()


class ActionModule(role_settings.RoleSettingsAction):
    ROLE = "node_tool"
    KEYS = tuple(node_tool.SETTINGS)
    TRANSFERS_FILES = True

    def run(self, tmp=None, task_vars=None):
        result = super(role_settings.RoleSettingsAction, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        try:
            args["settings"] = role_settings.fill(self.ROLE, self.KEYS, args.get("settings") or {},
                                                  task_vars, self._templar.template)
        except ValueError as exc:
            raise AnsibleActionFail("%s: %s" % (self._task.action, exc)) from exc
        files = controller_files() if args["settings"].get("install", True) else {}
        args["manifest"] = {rel: node_tool.sha256(data) for rel, data in files.items()}
        try:
            return self._run(result, args, files, task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def _module(self, args, task_vars):
        return self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)

    def _step(self, name, args, task_vars, check_mode=None):
        handler = builtin_step.handler_name(self._shared_loader_obj, name)
        return builtin_step.action(self, name, args, check_mode=check_mode,
                                   handler=handler).run(task_vars=task_vars)

    def _packages(self, plan, task_vars):
        """The distribution's packages from the node's own source; a failed result or None.
        apt's index is refreshed first, in --check too (it writes apt's lists only): an index
        older than the package, or none (a fresh image), would say "No package matching"."""
        names = plan["packages"]
        if plan["family"] == "debian":
            steps = [("ansible.builtin.apt", {"update_cache": True}, False),
                     ("ansible.builtin.apt", {"name": names, "state": "present"}, None)]
        else:
            steps = [("ansible.builtin.package", {"name": names, "state": "present"}, None)]
        for name, args, check_mode in steps:
            res = self._step(name, args, task_vars, check_mode)
            if res.get("failed") or res.get("unreachable"):
                return dict(res, msg="node_tool: installing %s: %s"
                            % (" ".join(names), res.get("msg", "failed")))
        return None

    def _run(self, result, args, files, task_vars):
        first = self._module(dict(args, apply=False), task_vars)
        plan = first.get("plan") or {}
        if first.get("failed") or not plan.get("drift"):
            result.update(first)
            return result
        if plan["packages"]:
            failed = self._packages(plan, task_vars)
            if failed:
                result.update(failed)
                return result
        if self._task.check_mode:
            result.update(first)
            return result
        remote = ""
        if plan["write"]:
            tmpdir = self._connection._shell.tmpdir or self._make_tmp_path()
            remote = self._connection._shell.join_path(tmpdir, "rdmaprov-node-tool.tar.gz")
            self._transfer_data(remote, archive(files, plan["write"]))
            self._fixup_perms2((tmpdir, remote))
        result.update(self._module(dict(args, apply=True, archive=remote), task_vars))
        if plan["packages"] and isinstance(result.get("plan"), dict) and not result.get("failed"):
            # The second reading finds them installed: the report names what this run did.
            result["plan"] = dict(result["plan"], packages=plan["packages"], drift=True)
            result["rdmaprov_report"] = node_tool.report(args["settings"], result["plan"],
                                                         result.get("version", ""), True)
        return result
