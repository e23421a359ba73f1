#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: kernel_modules
short_description: Load a set of kernel modules and report a truthful status for each
description:
  - Asks kernel_caps.module_status, the one answer every rdmaprov command gives (/proc/modules,
    /sys/module, modules.builtin, then the classes and device nodes a module creates), and runs
    C(modprobe) only for modules that are neither loaded nor built into the kernel.
  - On a kernel that cannot load modules (no /proc/modules, kernel.modules_disabled=1, no
    CAP_SYS_MODULE, no /lib/modules for the running kernel) nothing is attempted and each module
    that is not already there is reported as C(not applicable) with the reason. That is not a failure.
  - A module that fails to load on a kernel that can load modules fails the task; the message
    carries modprobe's output and the kernel's own lines from dmesg (e.g. nvidia_peermem's
    C(disagrees about version of symbol) after an OFED change).
  - Options come from /etc/modprobe.d; this module does not pass any. With O(persist) it writes
    the files that name the set and its options first (modules-load.d, modprobe.d), so that one
    call persists, loads, verifies and reports the set.
version_added: "0.1.0"
author: rdmaprov developers (!UNKNOWN)
options:
  names:
    description:
      - Modules to load, in order (dependencies first, although modprobe resolves them).
      - One of O(names) and O(settings) is required.
    type: list
    elements: str
  settings:
    description:
      - The rdma_modules role's settings (its rdma_modules_* variables without the prefix, and
        what preflight saw). The module merges the layered lists and the peer-memory rule into
        the set (driver_plan.module_plan() in module_utils) and takes O(names), O(load) and
        O(require_uverbs) from it.
      - In a task, every key it lacks is filled on the control host by the module's action
        plugin (plugins/plugin_utils/role_settings.py), from the role variable
        C(rdma_modules_<key>) where one is defined, else from the play (C(host), C(address),
        C(hosts), C(check_mode), C(connection), C(managed)). C({}) gives the role's settings whole.
    type: dict
    suboptions:
      base: {description: rdma_modules_base., type: list, elements: raw, default: []}
      ipoib: {description: rdma_modules_ipoib (adds ib_ipoib)., type: bool, default: false}
      peermem:
        description: rdma_modules_peermem (C(auto) = present where O(settings.has_gpus)).
        type: str
        choices: [auto, present, absent]
        default: auto
      peermem_name: {description: rdma_modules_peermem_name., type: str, default: nvidia_peermem}
      extra: {description: "rdma_modules_extra (names, or C(name) with C(state) and C(options))", type: list, elements: raw, default: []}
      group_extra: {description: "rdma_modules_group_extra, merged after O(settings.extra).", type: list, elements: raw, default: []}
      host_extra: {description: "rdma_modules_host_extra, merged last.", type: list, elements: raw, default: []}
      load: {description: rdma_modules_load., type: bool, default: true}
      verify_uverbs: {description: rdma_modules_verify_uverbs., type: bool, default: true}
      has_gpus: {description: Whether preflight saw NVIDIA GPUs., type: bool, default: false}
      has_hcas: {description: "Whether preflight saw HCAs (O(settings.verify_uverbs) applies there only).", type: bool, default: false}
      load_conf: {description: "rdma_modules_load_conf - the modules-load.d file listing the set; empty for none.", type: str, default: ""}
      modprobe_conf: {description: "rdma_modules_modprobe_conf - the modprobe.d file with the set's options; empty for none.", type: str, default: ""}
      managed: {description: "The managed-file header of those files (C(ansible_managed)), written as a comment.", type: str, default: Ansible managed}
  load:
    description: Load missing modules. With C(false) only report their state. With O(settings), its C(load).
    type: bool
    default: true
  persist:
    description:
      - Files to keep at exactly this content (owner root, group root), written before anything
        is loaded; changed when one differs, with a diff of each under C(--diff).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file.
        type: path
        required: true
      content:
        description: Its whole content, or its header where O(persist[].append) is set.
        type: str
        required: true
      append:
        description:
          - Add the set's lines after O(persist[].content), on a line of their own.
          - C(names), one module a line (a modules-load.d file); C(options), an C(options <name>
            <options>) line for each module that has options, else a comment saying there are
            none (a modprobe.d file). A control character in a value becomes a space.
        type: str
        choices: [names, options]
      mode:
        description: Its mode.
        type: str
        default: "0644"
  require_uverbs:
    description:
      - Fail unless /dev/infiniband/uverbs* exists after loading (a host with HCAs). Not judged
        under check mode when a module would still be loaded.
      - With O(settings), whether C(verify_uverbs) is set and C(has_hcas) is true.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - rdmaprov.cluster.attributes
attributes:
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Load the RDMA modules
  rdmaprov.cluster.kernel_modules:
    names: [ib_core, ib_uverbs, rdma_ucm, ib_umad, mlx5_core, mlx5_ib]

- name: Persist, load and verify them
  rdmaprov.cluster.kernel_modules:
    names: [ib_core, ib_uverbs]
    persist:
      - {path: /etc/modules-load.d/rdma.conf, content: "ib_core\nib_uverbs\n"}
    require_uverbs: true

- name: The rdma_modules role's set, from its layered lists
  rdmaprov.cluster.kernel_modules:
    settings:
      base: [ib_core, ib_uverbs, mlx5_core, mlx5_ib]
      host_extra: [{name: mlx5_core, options: prof_sel=2}]
      peermem: auto
      has_gpus: true
    persist:
      - {path: /etc/modules-load.d/rdma.conf, content: "# RDMA modules\n", append: names}
      - {path: /etc/modprobe.d/rdma.conf, content: "# their options\n", append: options}
"""

RETURN = r"""
can_load:
  description: Whether this kernel lets modules be loaded.
  returned: always
  type: bool
reason:
  description: Why modules can or cannot be loaded.
  returned: always
  type: str
modules:
  description: One entry per module.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: ib_core, before: absent, state: absent, loaded: false,
       evidence: "not in /proc/modules, /sys/module or modules.builtin, no /sys/class/infiniband",
       status: "not applicable: no /proc/modules: this kernel has no loadable-module support"}
    - {name: ib_uverbs, before: builtin, state: builtin, loaded: true,
       evidence: "/sys/class/infiniband_verbs exists and ib_uverbs is not a loaded module",
       status: built into the kernel}
    - {name: mlx5_ib, before: absent, state: loaded, loaded: true, status: loaded now}
written:
  description: The files of O(persist) that differed (under check mode, that would be written).
  returned: always
  type: list
  elements: str
names:
  description: The modules of the set, in order (O(names), or the plan's with O(settings)).
  returned: always
  type: list
  elements: str
rdmaprov_report:
  description: "One line per module (C(name: status)), then one per file written; rdmaprov shows them as the host's report."
  returned: always
  type: list
  elements: str
  sample: ["ib_core: loaded", "/etc/modules-load.d/rdmaprov.conf: written"]
"""

import glob
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.rdmaprov.cluster.plugins.module_utils import driver_plan, kernel_caps


def _dmesg_lines(module: AnsibleModule, name: str, limit: int = 5) -> list[str]:
    rc, out, err = module.run_command(["dmesg"])
    if rc != 0:
        return [f"(dmesg unreadable: {(err or out).strip()})"]
    key = name.replace("-", "_")
    lines = [line.strip() for line in out.splitlines() if key in line.replace("-", "_")]
    return lines[-limit:]


def _persist(module: AnsibleModule, item: dict) -> tuple[bool, dict]:
    """Keep one file at its content, owner root and mode; (changed, diff). Check mode: no write."""
    path, content = item["path"], item["content"]
    if item.get("append"):
        # The header (a template's text has no final newline), then the set's lines.
        content = (content.rstrip("\n") + "\n" if content else "") + item["append"]
    try:
        with open(path, "rb") as handle:
            before = to_text(handle.read(), errors="surrogate_or_strict")
    except FileNotFoundError:
        before = ""
        exists = False
    else:
        exists = True
    diff = {"before": before, "after": content, "before_header": path, "after_header": path}
    changed = not exists or before != content
    if changed and not module.check_mode:
        directory = os.path.dirname(path) or "."
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".rdmaprov-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(content))
        module.atomic_move(tmp, path)
    attrs = module.load_file_common_arguments(
        {"path": path, "mode": item["mode"], "owner": "root", "group": "root"})
    if exists or not module.check_mode:
        changed = module.set_fs_attributes_if_different(attrs, changed, diff=None)
    return changed, diff


SETTINGS = {
    **{k: {"type": "list", "elements": "raw", "default": []}
       for k in ("base", "extra", "group_extra", "host_extra")},
    "ipoib": {"type": "bool", "default": False},
    "peermem": {"type": "str", "default": "auto", "choices": ["auto", "present", "absent"]},
    "peermem_name": {"type": "str", "default": "nvidia_peermem"},
    **{k: {"type": "bool", "default": True} for k in ("load", "verify_uverbs")},
    **{k: {"type": "bool", "default": False} for k in ("has_gpus", "has_hcas")},
    **{k: {"type": "str", "default": ""} for k in ("load_conf", "modprobe_conf")},
    "managed": {"type": "str", "default": "Ansible managed"},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str"},
            "settings": {"type": "dict", "options": SETTINGS},
            "load": {"type": "bool", "default": True},
            "persist": {"type": "list", "elements": "dict", "default": [], "options": {
                "path": {"type": "path", "required": True},
                "content": {"type": "str", "required": True},
                "mode": {"type": "str", "default": "0644"},
                "append": {"type": "str", "choices": ["names", "options"]},
            }},
            "require_uverbs": {"type": "bool", "default": False},
        },
        required_one_of=[["names", "settings"]],
        mutually_exclusive=[["names", "settings"]],
        supports_check_mode=True,
    )
    p = module.params
    if p["settings"] is not None:
        try:
            plan = driver_plan.module_plan(p["settings"])
        except ValueError as exc:
            module.fail_json(msg=f"kernel_modules: {exc}")
        entries, names = plan["modules"], plan["names"]
        load, require_uverbs = plan["load"], plan["require_uverbs"]
        # The set's own files first (settings.load_conf, settings.modprobe_conf), then persist.
        p["persist"] = plan["files"] + p["persist"]
    else:
        names, load, require_uverbs = p["names"], p["load"], p["require_uverbs"]
        entries = [{"name": name} for name in names]
    if not names:
        module.fail_json(msg="the module set is empty (every entry absent?)")
    written, diffs = [], []
    for item in p["persist"]:
        if item["append"]:
            item = {**item, "append": driver_plan.file_lines(entries, item["append"])}
        file_changed, diff = _persist(module, item)
        if file_changed:
            written.append(item["path"])
            diffs.append(diff)
    caps = kernel_caps.module_loading("/", os.uname().release)
    modprobe = module.get_bin_path("modprobe") if caps["can_load"] else None
    if caps["can_load"] and not modprobe:
        caps = {"can_load": False, "reason": "no modprobe on this host (install kmod)"}

    statuses, failures, changed = [], [], bool(written)
    for name in names:
        found = kernel_caps.module_status(name, "/")
        before = found["state"]
        entry = {"name": name, "before": before, "state": before, "evidence": found["evidence"]}
        if before == "loaded":
            entry["status"] = "loaded"
        elif before == "builtin":
            entry["status"] = "built into the kernel"
        elif not caps["can_load"]:
            entry["status"] = f"not applicable: {caps['reason']}"
        elif not load:
            entry["status"] = "not loaded"
        elif module.check_mode:
            entry["status"] = "would load"
            changed = True
        else:
            rc, out, err = module.run_command([modprobe, "--", name])
            found = kernel_caps.module_status(name, "/")
            after = found["state"]
            entry["state"], entry["evidence"] = after, found["evidence"]
            if rc == 0 and after in ("loaded", "builtin"):
                entry["status"] = "loaded now"
                changed = True
            else:
                text = " ".join((err or out or f"modprobe exited {rc}").split())
                kernel = _dmesg_lines(module, name)
                entry["status"] = f"failed: {text}"
                entry["modprobe"] = text
                entry["dmesg"] = kernel
                failures.append(f"could not load {name}: {text}"
                                + (f" | dmesg: {' / '.join(kernel)}" if kernel else ""))
        entry["loaded"] = entry["state"] in ("loaded", "builtin")
        statuses.append(entry)

    loading = any(e["status"] == "would load" for e in statuses)
    if require_uverbs and not (module.check_mode and loading) \
            and not glob.glob("/dev/infiniband/uverbs*"):
        failures.append("no /dev/infiniband/uverbs* on a host with RDMA devices: is ib_uverbs "
                        "loaded, and is /dev/infiniband populated (udev)?")
    report = [f"{e['name']}: {e['status']}" for e in statuses]
    report += [f"{path}: {'would be written' if module.check_mode else 'written'}"
               for path in written]
    result = {"changed": changed, "can_load": caps["can_load"], "reason": caps["reason"],
              "modules": statuses, "names": names, "written": written, "rdmaprov_report": report}
    if module._diff and diffs:
        result["diff"] = diffs
    if failures:
        module.fail_json(msg="; ".join(failures), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
