# Copyright: rdmaprov developers
# Apache-2.0
"""The roles' unit filters: drift (what a probe module read of a role's files and units against
what the control host wants; plugins/module_utils/state_drift.py) and one value as one word of a
unit's setting (plugins/module_utils/unit_words.py)."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import state_drift, unit_words


def _drift(probe, files=None, units=None):
    """``probe | state_drift(files, units)``: one line per file or unit that differs."""
    probe = probe or {}
    return state_drift.compare(probe.get("file_state") or {}, probe.get("unit_state") or {},
                               list(files or []), list(units or []))


class FilterModule:
    def filters(self):
        return {"state_drift": _drift, "systemd_word": unit_words.systemd_word}
