# Copyright: rdmaprov developers
# Apache-2.0
"""Filters of the preflight role's report. The logic lives in plugins/module_utils/host_report.py,
where the unit tests reach it without Ansible."""

from __future__ import annotations

from ansible_collections.rdmaprov.cluster.plugins.module_utils import host_report


class FilterModule:
    def filters(self):
        return {
            "preflight_report": host_report.report,
            "preflight_missing": host_report.missing,
            "preflight_apt": host_report.apt_plan,
        }
