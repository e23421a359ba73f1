# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The firewall_apply action (module doc: plugins/modules/firewall_apply.py): one task that hands
the firewall plan's fields to the builtin modules (command, file, copy, systemd_service), so that
check mode, diff and changed are theirs. What to run and when is the plan's
(netcfg_firewall.apply_steps); the dead man's switch around a new nftables ruleset stays the
role's tasks (the connection is dropped and re-made between them)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.rdmaprov.cluster.plugins.module_utils import netcfg_firewall
from ansible_collections.rdmaprov.cluster.plugins.plugin_utils import builtin_step

STEPS = ("configure", "persist", "rolled_back")
OWNED = {"owner": "root", "group": "root"}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _valid, args = self.validate_argument_spec(argument_spec={
            "plan": {"type": "dict", "required": True},
            "step": {"type": "str", "required": True, "choices": list(STEPS)},
        })
        plan, step = args["plan"], args["step"]
        self._done = []
        try:
            if step == "rolled_back":
                result.update(self._rolled_back(plan, task_vars))
                return result
            if plan["backend"] == "nftables":
                steps = self._nft_prepare if step == "configure" else self._nft_persist
                failed = steps(plan, task_vars)
            elif step == "configure":
                failed = self._commands(plan, task_vars)
            else:
                return dict(result, changed=False, skipped=True,
                            skip_reason="only the nftables backend persists a ruleset")
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(self._summary(plan, failed))
        return result

    # --- one builtin module or action at a time ---------------------------------------------
    def _module(self, what, name, module_args, task_vars, real=False):
        """Run a module; real: even under --check (a read, or a command the plan made safe)."""
        task = self._task
        if real and task.check_mode:
            self._task = task.copy()
            self._task.check_mode = False
        try:
            res = self._execute_module(module_name=name, module_args=module_args,
                                       task_vars=task_vars)
        finally:
            self._task = task
        self._done.append((what, res))
        return res

    def _copy(self, what, copy_args, task_vars):
        """The copy action itself (content is sent, diff and check mode are the copy's)."""
        res = builtin_step.action(self, "ansible.legacy.copy", copy_args).run(task_vars=task_vars)
        self._done.append((what, res))
        return res

    def _summary(self, plan, failed):
        # "steps", not "results": a result with "results" reads as a loop's summary, whose
        # items come as events of their own, and --check --diff would then show no row for it.
        out = {"changed": any(r.get("changed") for _w, r in self._done),
               "steps": [dict(r, step=w) for w, r in self._done]}
        diffs = [r["diff"] for _w, r in self._done if r.get("changed") and r.get("diff")]
        if diffs:
            out["diff"] = [d for diff in diffs for d in (diff if isinstance(diff, list) else [diff])]
        if failed:
            what, res = failed
            out.update(failed=True, msg="%s: %s" % (what, res.get("msg") or res.get("stderr")
                                                    or "rc %s" % res.get("rc")))
        elif plan["check_mode"] and plan["check_report"]:
            # What --check would change where the commands skip their work: shown as a debug
            # task's message is (the dry runs' answers only with -v).
            out.update(changed=True, msg=plan["check_report"], _ansible_verbose_always=True,
                       rdmaprov_report=list(plan["check_report"]))
            if not self._display.verbosity:
                out.pop("steps")
        return out

    # --- firewalld and ufw: the plan's commands -----------------------------------------------
    def _commands(self, plan, task_vars):
        """The plan's firewall-cmd or ufw calls, in order. A plan made for --check holds only
        `ufw --dry-run` ones, which change nothing and so run even then; one made for a real run
        runs as the task's check mode says."""
        for argv in plan["commands"]:
            res = self._module(" ".join(argv), "ansible.legacy.command", {"argv": argv},
                               task_vars, real=plan["check_mode"])
            if res.get("skipped"):
                continue
            if res.get("failed") or res.get("rc"):
                return " ".join(argv), res
            res["changed"] = netcfg_firewall.command_changed(argv, res.get("stdout"))
        return None

    # --- nftables: the files around the dead man's switch -------------------------------------
    def _nft_prepare(self, plan, task_vars):
        """The ruleset directory, the candidate (checked by `nft -c`), and for a new ruleset the
        rollback ruleset and no rollback timer left from an earlier run."""
        res = self._module("Create the ruleset directory", "ansible.legacy.file",
                           dict(path=plan["nft_dir"], state="directory", mode="0700", **OWNED),
                           task_vars)
        if res.get("failed"):
            return "Create the ruleset directory", res
        # nft -c parses and checks the whole transaction against the kernel without committing.
        res = self._copy("Write and check the candidate ruleset",
                         dict(content=plan["nft_rules"], dest=plan["nft_candidate"], mode="0600",
                              validate="nft -c -f %s", **OWNED), task_vars)
        if res.get("failed"):
            return "Write and check the candidate ruleset", res
        if not plan["nft_apply"]:
            return None
        res = self._copy("Save the live table as the rollback ruleset",
                         dict(content=plan["nft_rollback_rules"], dest=plan["nft_rollback"],
                              mode="0600", **OWNED), task_vars)
        if res.get("failed"):
            return "Save the live table as the rollback ruleset", res
        if not self._task.check_mode:
            what = "Clear a rollback timer left from an earlier run"
            res = self._module(what, "ansible.legacy.command", {"argv": plan["nft_clear_timer"]},
                               task_vars)
            res["changed"] = False
            if res.get("rc") not in (0, 5):  # 5: no such unit, nothing to clear
                return what, res
        return None

    def _nft_persist(self, plan, task_vars):
        """Only reached when the live table is the confirmed one: persist it, and install and
        enable the unit that loads it at boot."""
        if plan["persist_nft"]:
            res = self._copy("Persist the confirmed ruleset",
                             dict(src=plan["nft_candidate"], dest=plan["nft_file"],
                                  remote_src=True, mode="0600", **OWNED), task_vars)
            if res.get("failed"):
                return "Persist the confirmed ruleset", res
        unit = self._copy("Install the unit that loads the table at boot",
                          dict(content=plan["nft_unit"], dest=plan["unit_file"], mode="0644",
                               **OWNED), task_vars)
        if unit.get("failed"):
            return "Install the unit that loads the table at boot", unit
        # Under --check a unit that is still to be written does not exist yet: its drift is above.
        if self._task.check_mode and unit.get("changed"):
            return None
        res = self._module("Enable the boot unit", "ansible.legacy.systemd_service",
                           {"name": plan["nft_unit_name"], "enabled": True,
                            "daemon_reload": bool(unit.get("changed"))}, task_vars)
        if res.get("failed"):
            return "Enable the boot unit", res
        if res.get("changed") and not res.get("diff"):
            # What --diff shows for it (systemd_service gives no diff): the unit's enablement.
            state = (res.get("status") or {}).get("UnitFileState") or "not enabled"
            res["diff"] = {"before": {"unit": plan["nft_unit_name"], "enabled": state},
                           "after": {"unit": plan["nft_unit_name"], "enabled": "enabled"}}
        return None

    # --- a rescue: what the rollback left -------------------------------------------------------
    def _rolled_back(self, plan, task_vars):
        """Read the table after the rollback (absent is a valid rolled-back state) and fail the
        host with the line that says so."""
        res = self._module("Read the table after the rollback", "ansible.legacy.command",
                           {"argv": ["nft", "list", "table", "inet", plan["nft_table"]]},
                           task_vars, real=True)
        task = task_vars.get("ansible_failed_task") or {}
        failed = task_vars.get("ansible_failed_result") or {}
        msg = netcfg_firewall.rollback_report(
            plan, task_vars.get("inventory_hostname"), task.get("name") or "apply",
            failed.get("msg", "connection lost"), res.get("rc"))
        return {"changed": False, "failed": True, "msg": msg}
