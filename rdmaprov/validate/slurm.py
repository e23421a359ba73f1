"""Validation as a Slurm job: `rdmaprov validate --launcher slurm --partition P [--nodes N]`.

Slurm is the distributed engine such a site already runs, so no Ansible fan-out: on a submit
host (a login node), rdmaprov

1. checks the flags and the nccl_validate_* variables (-e), then asks Slurm for the nodes:
   ``salloc --partition P --nodes N --ntasks-per-node 1 --exclusive``, which runs this module
   (``python -m rdmaprov.validate.slurm SPEC``) inside the allocation;
2. builds each node's launch with ``launch()`` of plugins/module_utils/validate_launch.py, the
   one function the nccl_validate role's launch uses (rendezvous on the first node, at its
   Slurm NodeAddr when that is an IP address, else ``nccl_validate_master_addr``);
3. runs one ``srun`` step, a task per node, all at once: srun's stdin brings worker.py and
   its parts, rounds.py, the port-counters script, slurm_task.py and the plans to every node,
   slurm_task.py runs the node's plan and hands its result files back as base64 lines
   (``srun --label``);
4. writes the results directory the role writes (``<results>/fabric/run.json``,
   ``<results>/fabric/<node>/{rc, result.json, worker.log, counters_*.json, argv.txt}``, the
   rail round's ``<results>/rails/<node>/``), which
   rdmaprov/validate/judge.py turns into the same report, and ``--judge DIR`` re-judges;
5. with ``--drain``, once the job is over, drains the hosts the verdict blames (their own checks
   or the pair rounds; not those that never produced a result, since a peer may be the cause)
   with ``rdmaprov: validate: <reason>``, by rdmaprov/check/slurm.py's NHC rules: a node drained
   for another reason keeps it.

Not done here, unlike the role: the image preflight (run the worker's --preflight yourself, or
under Pyxis the image is what srun starts) and stopping the peers of a host that could not run
(they end on their own watchdog, --timeout).
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import yaml

from rdmaprov import collection
from rdmaprov.errors import UserError
from rdmaprov.resources import collection_root
from rdmaprov.validate import request, run_times
from rdmaprov.validate.report import Report
from rdmaprov.validate.request import Request
from rdmaprov.values import convert

LABEL = "fabric"
JOB_NAME = "rdmaprov-validate"
PREFIX = "nccl_validate_"
# Beyond the run's own timeout: the step's start, the files' way back, the allocation's end.
SLACK_S = 120
HERE = Path(__file__).resolve().parent


def check_flags(args: Mapping[str, Any]) -> None:
    """--launcher and its flags as given, before anything runs (one line each, exit 1)."""
    launcher = args.get("launcher")
    if launcher not in ("ansible", "slurm"):
        raise UserError(f"--launcher/RDMAPROV_VALIDATE_LAUNCHER: {launcher!r} is not one "
                        "of ansible, slurm")
    if launcher != "slurm":
        for flag in ("--partition", "--nodes", "--drain", "--srun-arg"):
            if args.get(flag[2:].replace("-", "_")):
                raise UserError(f"{flag} is for --launcher slurm")
        return
    if args.get("partition") in (None, ""):
        raise UserError("--launcher slurm needs --partition P (the partition whose nodes to "
                        "validate)")
    request.judged(args, ["nodes"])
    if args.get("inventory") is not None:
        raise UserError("--launcher slurm takes the nodes from Slurm: give no INVENTORY")
    if args.get("judge") is not None:
        raise UserError("--judge DIR runs nothing: not with --launcher slurm")
    for flag in ("--limit", "--check", "--compare-socket", "--retry-failed"):
        if args.get(flag[2:].replace("-", "_")):
            raise UserError(f"{flag} is not available with --launcher slurm")
    if args.get("runtime") == "container":
        raise UserError("--runtime container: with --launcher slurm the worker runs as the "
                        "job step; for an image use Pyxis: --srun-arg=--container-image=IMAGE "
                        "(docs/validate.md)")
    missing = [t for t in ("salloc", "srun", "sinfo", "scontrol") if shutil.which(t) is None]
    if missing:
        raise UserError(f"--launcher slurm needs Slurm's {', '.join(missing)} on PATH "
                        "(run it on a submit host)")


def settings(req: Request) -> tuple[dict[str, Any], dict[str, Any]]:
    """The role's settings for launch() (keys without the nccl_validate_ prefix), from the
    role's defaults, then -e nccl_validate_* values (checked against the role's argument
    spec), then the flags; and the variables themselves."""
    from rdmaprov import inventory

    root = collection_root()
    variables: dict[str, Any] = yaml.safe_load(
        (root / "roles/nccl_validate/defaults/main.yml").read_text())
    given: dict[str, Any] = {}
    for _label, data in inventory.load_extra_vars(list(req.run.extra_vars)):
        given.update(data)
    other = sorted(k for k in given if not str(k).startswith(PREFIX))
    if other:
        raise UserError(f"-e {other[0]}: --launcher slurm takes only nccl_validate_* "
                        "variables (there is no inventory)")
    specs = inventory.load_specs(root)
    problems = inventory.check_variables(given, specs)
    if problems:
        raise UserError(problems[0])
    # As Ansible would hand them to the role: key=value's strings as the spec's type.
    given = {k: val if val is None else convert(val, str(specs.options[k].get("type", "str")))
             for k, val in given.items()}
    # The worker is the job step itself: the host runtime (an image comes through Pyxis).
    variables[PREFIX + "runtime"] = "host"
    variables.update(given)
    variables.update(req.role_vars("run"))
    v = {k[len(PREFIX):]: val for k, val in variables.items() if k.startswith(PREFIX)}
    if v["runtime"] != "host":
        raise UserError(f"nccl_validate_runtime {v['runtime']}: with --launcher slurm the "
                        "worker runs as the job step (runtime host); for an image use Pyxis: "
                        "--srun-arg=--container-image=IMAGE (docs/validate.md)")
    nproc = v["nproc_per_node"]
    if nproc == "auto":
        if v["backend"] == "nccl":
            raise UserError("backend nccl with --launcher slurm: set nccl_validate_nproc_per_node "
                            "(-e) to the GPUs per node")
        nproc = 1
    s = {
        "runtime": "host", "engine": "none", "image": v["image"], "python": v["python"],
        "pythonpath": list(v["pythonpath"] or []), "container_args": [],
        "memlock": v["memlock"], "devices": [], "gpus": v["gpus"], "gpu_count": 0,
        "backend": v["backend"], "launcher": v["launcher"], "nproc": int(nproc),
        "worker_args": list(v["worker_args"] or []),
        **{k[len(PREFIX):]: val for k, val in req.role_vars("plan").items()},
        "rendezvous_timeout": int(v["rendezvous_timeout"]),
        "env": {**(v["env"] or {}), **(v["env_override"] or {})},
        "nccl_debug": v["nccl_debug"], "nccl_debug_subsys": v["nccl_debug_subsys"],
        # The rail round (ib_write_bw per HCA port pair), as the role runs it.
        "rails": v["rails"], "rail_cuda": bool(v["rail_cuda"]),
        "auto_env": {}, "remote_dir": v["remote_dir"], "rdma_mounts": [], "torch_libuv": None,
    }
    return s, v


def spec_of(s: dict[str, Any], v: dict[str, Any], results: Path,
            srun_args: list[str]) -> dict[str, Any]:
    """What the process inside the allocation needs (it gets it as a JSON file)."""
    return {"settings": s, "results": str(results), "timeout": int(v["timeout"]),
            "master_addr": v["master_addr"] or "", "master_port": int(v["master_port"]),
            "srun_args": srun_args, "launcher": v["launcher"], "backend": v["backend"],
            "image": None}


def _slurm(argv: list[str], timeout: float = 30) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{argv[0]}: {exc}") from None
    if p.returncode != 0:
        raise UserError(f"{' '.join(argv[:2])}: {(p.stderr or p.stdout).strip()[:300]}")
    return p.stdout


def idle_nodes(partition: str) -> int:
    """Nodes of the partition that are idle now (the default --nodes)."""
    out = _slurm(["sinfo", "-h", "-p", partition, "-t", "idle", "-o", "%D"])
    return sum(int(x) for x in out.split() if x.isdigit())


def execute(req: Request, human: TextIO) -> Report:
    """Allocate, run the worker on every node with srun, judge the results directory."""
    from rdmaprov.validate import judge as J
    from rdmaprov.validate import pipeline

    assert req.partition is not None
    pol = req.policy()
    s, v = settings(req)
    nodes = req.nodes or idle_nodes(req.partition)
    if nodes < 1:
        raise UserError(f"partition {req.partition}: no idle node (sinfo); give --nodes N")
    keep = req.results is not None
    started = time.time()
    results = (req.results.resolve() if req.results is not None
               else Path(tempfile.mkdtemp(prefix="rdmaprov-validate-")))
    work = Path(tempfile.mkdtemp(prefix="rdmaprov-slurm-"))
    try:
        if keep:
            results.mkdir(parents=True, exist_ok=True)
            for old in results.iterdir():  # runs of an earlier call would be judged again
                if old.is_dir() and (old / "run.json").is_file():
                    shutil.rmtree(old)
            (results / run_times.RECORD).unlink(missing_ok=True)  # an earlier run's
        spec = spec_of(s, v, results, list(req.srun_arg))
        timeout = spec["timeout"]
        (work / "spec.json").write_text(json.dumps(spec))
        minutes = math.ceil((timeout + SLACK_S) / 60) + 1
        argv = ["salloc", f"--partition={req.partition}", f"--nodes={nodes}",
                "--ntasks-per-node=1", "--exclusive", f"--job-name={JOB_NAME}",
                f"--time={minutes}", "--quiet", "--",
                sys.executable, "-m", "rdmaprov.validate.slurm", str(work / "spec.json")]
        print(f"slurm: {nodes} node(s) of partition {req.partition}: {' '.join(argv[:8])}",
              file=human, flush=True)
        try:
            # The job's own lines (salloc's, and this module's inside it) go to stderr.
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               timeout=timeout + SLACK_S + 3600, check=False)
        except subprocess.TimeoutExpired:
            raise UserError("salloc: no result within the run's timeout and an hour of "
                            "queueing") from None
        if not (results / LABEL / "run.json").is_file():
            raise UserError(f"salloc ended with status {p.returncode} and no results "
                            "(its error is above)")
        report = J.judge(results, pol, req.pair_fraction)
        # The whole validation by the controller's clock, queueing included; no inventory.
        run_times.controller(report, started, f"none: Slurm partition {req.partition}")
        if keep:
            run_times.save_record(report, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not keep:
            shutil.rmtree(results, ignore_errors=True)
    pipeline.write_outputs(report, req)
    if req.drain:
        drain(report, human)
    return report


def to_drain(report: Report) -> dict[str, str]:
    """{host: reason} of the hosts the verdict blames: those that failed their own checks
    (transport, GDR, ports, line rate) or the pair rounds. Hosts that never produced a result
    are not drained: a peer that never joined can be the cause."""
    return {h.host: "validate: " + "; ".join(h.reasons)
            for h in report.hosts if not h.passed and not h.error and h.reasons}


def drain(report: Report, human: TextIO) -> None:
    from rdmaprov.check import slurm

    for host, reason in to_drain(report).items():
        try:
            action = slurm.apply(host, reason)
        except slurm.SlurmError as exc:
            print(f"slurm {host}: --drain: {exc}", file=sys.stderr)
            continue
        print(f"slurm {host}: {action.why}", file=human)


# ----- inside the allocation (salloc runs this module) ---------------------------------------

def _members() -> list[str]:
    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise UserError("not inside a Slurm allocation (no SLURM_JOB_NODELIST)")
    return _slurm(["scontrol", "show", "hostnames", nodelist]).split()


def _node_addrs(members: list[str]) -> dict[str, str]:
    out = _slurm(["sinfo", "-h", "-N", "-n", ",".join(members), "-o", "%N|%o"])
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def plans(spec: dict[str, Any], members: list[str], addrs: dict[str, str]) -> dict[str, Any]:
    """Each node's launch, from validate_launch.launch(): {'hosts': {node: plan}, 'master',
    'master_addr', ...}."""
    vl = collection.validate_launch
    s = spec["settings"]
    master = members[0]
    own, why = vl.own_address(addrs.get(master), None, s["env"])
    if own is None:
        why = (f"Slurm's NodeAddr of {master} is {addrs.get(master)!r}, not an IP address")
    try:
        addr = vl.rendezvous_address(members, spec["master_addr"],
                                     {"name": master, "own_addr": own, "own_addr_from": why})
    except ValueError as exc:
        raise UserError(str(exc)) from None
    port = spec["master_port"]
    try:
        hosts = {h: vl.launch(s, LABEL, members, h, addr, port) for h in members}
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return {"hosts": hosts, "master": master, "master_addr": addr, "master_port": port,
            "timeout": spec["timeout"]}


def worker_files() -> dict[str, Path]:
    """The worker and what runs beside it wherever it runs (the nccl_validate role copies the
    same, tests/unit/test_validate_worker.py checks): its parts, the pair planner and the port
    reader, all standard library only (validate_launch.worker_sources)."""
    ports = collection_root() / "plugins/module_utils/rdma_ports.py"
    sources = collection.validate_launch.worker_sources(str(HERE / "worker.py"), str(ports))
    return {name: Path(src) for name, src in sources.items()}


def bundle(plan: dict[str, Any]) -> bytes:
    """What srun's stdin brings to every node: the worker and its neighbours, and the plans."""
    buf = io.BytesIO()
    files = {**worker_files(), "slurm_task.py": HERE / "slurm_task.py"}
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, path in files.items():
            tar.add(str(path), arcname=name)
        data = json.dumps(plan).encode()
        info = tarfile.TarInfo("plans.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def srun_argv(spec: dict[str, Any], nodes: int) -> list[str]:
    s = spec["settings"]
    bin_dir = f"{s['remote_dir']}/bin"
    # Unpack what stdin brings, then hand over to slurm_task.py with the worker's python.
    script = ('d=$1; py=$2; rm -rf "$d" && mkdir -p "$d" && tar -x -C "$d" && '
              'exec "$py" "$d/slurm_task.py" "$d"')
    return ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            "--kill-on-bad-exit=0", "--label", "--input=all", f"--job-name={JOB_NAME}",
            *spec["srun_args"], "sh", "-c", script, "sh", bin_dir, str(s["python"])]


def unpack(stdout: str, run_dir: Path) -> list[str]:
    """srun --label's stdout ("<task>: <base64 line>") → each task's files under run_dir;
    returns the nodes whose files came back."""
    chunks: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        task, sep, data = line.partition(": ")
        if sep and task.strip().isdigit():
            chunks.setdefault(task.strip(), []).append(data.strip())
    got = []
    for lines in chunks.values():
        try:
            raw = base64.b64decode("".join(lines), validate=True)
            names = _extract(raw, run_dir)
        except (ValueError, tarfile.TarError, OSError):
            continue  # a task that printed something else: its node has no files, and says so
        got += names
    return got


def _extract(raw: bytes, run_dir: Path) -> list[str]:
    """Only ``<node>/<one of slurm_task.FILES>`` (into ``run_dir/<node>``) and the rail round's
    ``<node>/rails/<name>`` (into ``<results>/rails/<node>``, where the role fetches them and
    the judge reads them), plain files (Python 3.11.2 has no extraction filter)."""
    from rdmaprov.validate.slurm_task import FILES, RAIL_NAME, RAILS

    hosts = set()
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
        for m in tar.getmembers():
            host, _, name = m.name.partition("/")
            if not m.isfile() or host in ("", ".", "..") or "/" in host:
                continue
            sub, _, rail = name.partition("/")
            if name in FILES:
                dest = run_dir / host
            elif sub == RAILS and RAIL_NAME.match(rail):
                dest, name = run_dir.parent / RAILS / host, rail
            else:
                continue
            src = tar.extractfile(m)
            if src is None:
                continue
            dest.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(src.read())
            if dest.parent == run_dir:
                hosts.add(host)
    return sorted(hosts)


def record(spec: dict[str, Any], plan: dict[str, Any], members: list[str],
           job: str | None) -> Path:
    """A fresh ``<results>/fabric`` with its run.json (the role's keys, and the Slurm job)."""
    run_dir = Path(spec["results"]) / LABEL
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(run_dir.parent / "rails", ignore_errors=True)  # an earlier run's rail round
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({
        "label": LABEL, "hosts": members, "master": plan["master"],
        "master_addr": plan["master_addr"], "master_port": plan["master_port"],
        "runtime": "host", "image": spec["image"], "launcher": spec["launcher"],
        "backend": spec["backend"], "nproc_per_node": spec["settings"]["nproc"],
        "slurm_job": job}, indent=2) + "\n")
    return run_dir


def inside(spec_path: Path) -> int:
    spec = json.loads(spec_path.read_text())
    members = _members()
    plan = plans(spec, members, _node_addrs(members))
    run_dir = record(spec, plan, members, os.environ.get("SLURM_JOB_ID"))
    print(f"slurm: job {os.environ.get('SLURM_JOB_ID')} on {', '.join(members)}: the worker "
          f"on every node at once (srun), rendezvous {plan['master_addr']}:{plan['master_port']}",
          file=sys.stderr, flush=True)
    try:
        p = subprocess.run(srun_argv(spec, len(members)), input=bundle(plan),
                           capture_output=True, timeout=spec["timeout"] + SLACK_S, check=False)
        out, err, status = p.stdout, p.stderr, str(p.returncode)
    except subprocess.TimeoutExpired as exc:  # each node's own timeout should have come first
        out, err = exc.stdout or b"", exc.stderr or b""
        status = f"killed after {spec['timeout'] + SLACK_S} s"
    got = unpack(out.decode(errors="replace"), run_dir)
    if status != "0" or len(got) < len(members):
        lines = err.decode(errors="replace").strip().splitlines()
        print(f"slurm: srun ended with status {status}; files from {len(got)} of "
              f"{len(members)} nodes" + (f"; {lines[-1]}" if lines else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(inside(Path(sys.argv[1])))
    except UserError as exc:
        print(f"rdmaprov: error: {exc}", file=sys.stderr)
        sys.exit(1)
