"""The validation hands the role the worker of the rdmaprov that runs it.

The role's fallback (the probe's action importing rdmaprov in Ansible's Python; a pipe lookup
before) fails when rdmaprov runs from a checkout on PYTHONPATH: the engine starts Ansible without
the caller's PYTHONPATH. That was the H100/H200 host run's "Find the worker on the controller ...
returned 1".
"""
from __future__ import annotations

import sys
from pathlib import Path

import rdmaprov
from rdmaprov import inventory
from rdmaprov.run_options import RunOptions
from rdmaprov.validate import pipeline, request
from rdmaprov.validate.report import RunInfo


class _Report:
    """What _live returns: a report of hosts, none failed before the run, and its times."""
    hosts: tuple = ()
    run = RunInfo()


REPORT = _Report()


def _merged_extra_vars(tmp_path, monkeypatch, user_extra: list[str]) -> dict:
    seen = {}

    def live(req, run, inv, pol, res, human):
        seen["extra"] = list(run.extra_vars)
        return REPORT

    monkeypatch.setattr(pipeline, "_live", live)
    monkeypatch.setattr(pipeline.inventory_mod, "load", lambda *a, **k: None)
    monkeypatch.setattr(pipeline, "write_outputs", lambda *a: None)
    monkeypatch.setattr(pipeline.record, "save", lambda *a: None)
    req = request.build({"inventory": tmp_path / "inv.ini"},
                        RunOptions(extra_vars=tuple(user_extra)))
    assert pipeline.execute(req, sys.stdout) is REPORT
    merged: dict = {}
    for _label, data in inventory.load_extra_vars(seen["extra"]):  # Ansible's order: last wins
        merged.update(data)
    return merged


def test_the_role_gets_this_rdmaprovs_worker(tmp_path, monkeypatch) -> None:
    merged = _merged_extra_vars(tmp_path, monkeypatch, [])
    src = Path(merged["nccl_validate_worker_src"])
    assert src == Path(rdmaprov.__file__).parent / "validate" / "worker.py"
    assert src.is_file()


def test_a_users_own_worker_still_wins(tmp_path, monkeypatch) -> None:
    merged = _merged_extra_vars(tmp_path, monkeypatch,
                                ["nccl_validate_worker_src=/srv/my/worker.py"])
    assert merged["nccl_validate_worker_src"] == "/srv/my/worker.py"
