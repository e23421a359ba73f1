# Copyright: rdmaprov developers
# Apache-2.0
"""The roles' drift filter: what a probe module read of a role's files and units against what the
control host wants. The logic lives in plugins/module_utils/state_drift.py."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift


def _drift(probe, files=None, units=None):
    """``probe | state_drift(files, units)``: one line per file or unit that differs."""
    probe = probe or {}
    return state_drift.compare(probe.get("file_state") or {}, probe.get("unit_state") or {},
                               list(files or []), list(units or []))


class FilterModule:
    def filters(self):
        return {"state_drift": _drift}
