"""What an operator does about a failure: one vocabulary shared by check, validate and explain.

Fleet health tools map every failing check to a remediation class so that automation can act
on it (drain and open a hardware ticket, reset a link, fix a config file) without parsing prose.
Every diagnosis in rdmaprov (a `check` item, a `validate` host reason, an `explain` rule) names
one of these. The values are stable strings: they appear in `--json`, the `--nhc` line and the
Slurm drain reason.
"""

from __future__ import annotations

from enum import StrEnum


class Remedy(StrEnum):
    """A remediation class: a str, so it serialises as its value in JSON and text."""

    CONFIG = "config"  # a setting, file, flag or install is wrong; the node is not sick
    REPLACE = "replace"  # hardware fault (HCA, cable, transceiver, GPU): reseat or replace it
    RESET_LINK = "reset-link"  # a link flaps, trained down or collects errors: reset the port
    REBOOT = "reboot"  # driver or device state a reboot clears (catastrophic error, stuck module)
    FIRMWARE = "firmware"  # driver/firmware mismatch or a firmware syndrome: update or reflash
    INVESTIGATE = "investigate"  # a symptom without a single known cause: look at the named part


ALL = tuple(r.value for r in Remedy)
