"""What `rdmaprov validate` is asked to do, as typed data.

Each setting's flag, environment variable, form, default, role variable and worker flag are
one entry of the table ``ranges.VALIDATE`` (plugins/module_utils/ranges.py). The command line
(rdmaprov/cli/validate.py) and bootstrap's last phase build a ``Request`` from it with
``build()``; the run (pipeline.py, slurm.py) takes the request and hands the role its
variables with ``role_vars()``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdmaprov import collection
from rdmaprov.errors import UserError
from rdmaprov.run_options import RunOptions
from rdmaprov.validate import verdict as V

TABLE = collection.ranges
SETTINGS = TABLE.SETTINGS
PAIRWISE = TABLE.PAIRWISE


def _default(name: str) -> Any:
    return SETTINGS[name].default


@dataclass(frozen=True)
class Request:
    """One validation: where (inventory, a results directory to judge, or Slurm), the
    settings of ranges.VALIDATE (judged, of their types), and the shared run options."""

    inventory: Path | None = None
    judge: Path | None = None
    plan: int | None = None
    # what runs (None: the inventory's nccl_validate_* value)
    runtime: str | None = None
    image: str | None = None
    backend: str | None = None
    max_bytes: str | None = None
    timeout: int | None = None
    # verdict
    transport: str | None = None
    allow_socket: bool = False
    require_gdr: bool = False
    bw_fraction: float = _default("bw_fraction")
    min_busbw: float | None = None
    max_jitter: float = _default("max_jitter")
    rail_fraction: float = _default("rail_fraction")
    pairwise: str = _default("pairwise")
    pair_fraction: float = _default("pair_fraction")
    compare_socket: bool = False
    # Slurm
    launcher: str = _default("launcher")
    partition: str | None = None
    nodes: int | None = None
    drain: bool = False
    srun_arg: tuple[str, ...] = ()
    # output
    junit: Path | None = None
    html: Path | None = None
    results: Path | None = None
    run: RunOptions = field(default_factory=RunOptions)

    def policy(self) -> V.Policy:
        try:
            return V.Policy(transport=self.transport, allow_socket=self.allow_socket,
                            require_gdr=self.require_gdr, bw_fraction=self.bw_fraction,
                            min_busbw_GBps=self.min_busbw, max_jitter=self.max_jitter,
                            rail_fraction=self.rail_fraction)
        except ValueError as exc:
            raise UserError(f"verdict options: {exc}") from None

    def role_vars(self, group: str) -> dict[str, Any]:
        """The nccl_validate role's variables for the settings of ``group`` ("run": what
        every play of a run takes, where given; "plan": the fabric run's pair-round plan)."""
        out: dict[str, Any] = {}
        for s in TABLE.VALIDATE:
            if s.group != group:
                continue
            value = getattr(self, s.name)
            if group == "run" and not value:
                continue  # the inventory's value stands
            if s.role_var:
                out[s.role_var] = s.role_default if value is None else value
            elif s.worker_flag:
                out["nccl_validate_worker_args"] = [s.worker_flag, str(value)]
        return out


def env_default(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """A setting's value when no flag gives it: its environment variable, else its default
    (a switch is on when its variable is 1)."""
    s = SETTINGS[name]
    env = os.environ if environ is None else environ
    if s.default is False:
        return env.get(s.env) == "1" if s.env else False
    if s.env and s.env in env:
        return env[s.env]
    return s.default


def judged(values: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """These settings of ``values`` (as given: text, or argparse's value) judged against the
    table, every problem one line; each good value converted to its type."""
    problems, out = [], {}
    for name in names:
        s = SETTINGS[name]
        value = values.get(name)
        why = TABLE.flag_problem(s.flag, value)
        if why:
            problems.append(why)
        elif value not in (None, ""):
            out[name] = int(float(value)) if s.kind is int else s.kind(value)
    if problems:
        raise UserError("\n".join(problems))
    return out


def build(values: Mapping[str, Any], run: RunOptions | None = None) -> Request:
    """The request from the settings as given (the command line's, or ``env_default``'s for
    those ``values`` lacks), judged before anything runs (one line each, exit 1)."""
    given = {s.name: values[s.name] if s.name in values else env_default(s.name)
             for s in TABLE.VALIDATE}
    if given["pairwise"] not in PAIRWISE:
        raise UserError(f"--pairwise/RDMAPROV_VALIDATE_PAIRWISE: {given['pairwise']!r} is not "
                        f"one of {', '.join(PAIRWISE)}")
    given.update(judged(given, [s.name for s in TABLE.VALIDATE if s.form]))
    for s in TABLE.VALIDATE:
        if s.group == "output" and given[s.name] is not None:
            given[s.name] = Path(given[s.name])
    req = Request(inventory=values.get("inventory"), judge=values.get("judge"),
                  partition=values.get("partition"), drain=bool(values.get("drain")),
                  srun_arg=tuple(values.get("srun_arg") or ()), run=run or RunOptions(),
                  **given)
    req.policy()  # its own rules (a positive --min-busbw), as one line
    return req
