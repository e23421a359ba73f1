"""`rdmaprov validate --launcher slurm` without a cluster: each node's launch comes from
validate_launch.launch() (the role's function), the node side (slurm_task.py) runs a real plan
on this host and its srun --label output becomes the role's results directory, which the judge
reads as it reads the role's."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from rdmaprov.cli import build_parser, options
from rdmaprov.errors import UserError
from rdmaprov.validate import judge as J
from rdmaprov.validate import pipeline, request
from rdmaprov.validate import slurm as S

VARS = ('{"nccl_validate_backend": "gloo", "nccl_validate_master_port": 29611, '
        '"nccl_validate_worker_args": ["--max-bytes", "1M", "--iters", "2"]}')


def spec(tmp: Path, *extra: str) -> dict[str, Any]:
    args = build_parser("validate").parse_args(
        ["validate", "--launcher", "slurm", "-p", "gpu", "-e", VARS, *extra])
    s, v = S.settings(request.build(vars(args), options.of(args)))
    return S.spec_of(s, v, tmp / "results", [])


def test_each_node_gets_the_roles_launch(tmp_path: Path) -> None:
    sp = spec(tmp_path)
    s = sp["settings"]
    assert (s["runtime"], s["backend"], s["nproc"], s["python"]) == ("host", "gloo", 1, "python3")
    nodes = ["gpu7", "gpu8", "gpu9"]
    plan = S.plans(sp, nodes, {"gpu7": "10.3.0.7", "gpu8": "10.3.0.8", "gpu9": "gpu9"})
    assert (plan["master"], plan["master_addr"], plan["master_port"]) == ("gpu7", "10.3.0.7",
                                                                          29611)
    for rank, node in enumerate(nodes):
        argv = plan["hosts"][node]["argv"]
        assert f"--node-rank={rank}" in argv and "--nnodes=3" in argv
        assert "--master-addr=10.3.0.7" in argv
        assert "/var/tmp/rdmaprov-validate/bin/worker.py" in argv
        assert argv[argv.index("--max-bytes") + 1] == "1M"
        assert plan["hosts"][node]["env"]["RDMAPROV_VALIDATE_RUN"] == "fabric"
    # The pair rounds ride in the same processes, as with the role.
    assert argv[argv.index("--pairs") + 1] == "auto"


def test_key_value_settings_take_their_spec_type(tmp_path: Path) -> None:
    s = spec(tmp_path, "-e", "nccl_validate_pythonpath=/opt/torch,/opt/more",
             "-e", "nccl_validate_rendezvous_timeout=30")["settings"]
    assert s["pythonpath"] == ["/opt/torch", "/opt/more"] and s["rendezvous_timeout"] == 30


def test_rendezvous_needs_an_address(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"NodeAddr of gpu7 is 'gpu7', not an IP address.*"
                       r"nccl_validate_master_addr"):
        S.plans(spec(tmp_path), ["gpu7", "gpu8"], {"gpu7": "gpu7", "gpu8": "gpu8"})
    sp = spec(tmp_path, "-e", "nccl_validate_master_addr=10.9.9.9")
    assert S.plans(sp, ["gpu7", "gpu8"], {"gpu7": "gpu7"})["master_addr"] == "10.9.9.9"


@pytest.mark.parametrize("extra, message", [
    (("-e", "nccl_validate_runtime=container"), "nccl_validate_runtime container: with "
     "--launcher slurm the worker runs as the job step"),
    (("-e", "nccl_validate_backend=nccl"), "set nccl_validate_nproc_per_node"),
    (("-e", "net_mtu_default=9000"), "-e net_mtu_default: --launcher slurm takes only "
     "nccl_validate_*"),
    (("-e", "nccl_validate_timeout=soon"), "nccl_validate_timeout: 'soon' is not an integer"),
])
def test_bad_settings_are_one_line(tmp_path: Path, extra: tuple[str, ...], message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        spec(tmp_path, *extra)


def test_node_side_to_results_dir_to_verdict(tmp_path: Path) -> None:
    """One node, this host: the plan launch() builds (direct launcher, this python), brought
    by the bundle, run by slurm_task.py as srun would (SLURMD_NODENAME), its stdout in srun
    --label's format unpacked into the results directory, judged."""
    sp = spec(tmp_path, "-e", f"nccl_validate_remote_dir={tmp_path / 'node'}",
              "-e", f"nccl_validate_python={sys.executable}", "-e",
              "nccl_validate_launcher=direct", "--pairwise", "never")
    plan = S.plans(sp, ["n1"], {"n1": "10.3.0.1"})
    assert plan["master_addr"] == "127.0.0.1"  # one host: as the role does
    bin_dir = tmp_path / "node" / "bin"
    bin_dir.mkdir(parents=True)
    with tarfile.open(fileobj=__import__("io").BytesIO(S.bundle(plan))) as tar:
        assert sorted(tar.getnames()) == sorted(["plans.json", "slurm_task.py",
                                                 *S.worker_files()])
        assert {"worker.py", "rounds.py", "rdma_ports.py"} <= set(S.worker_files())
        tar.extractall(bin_dir)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, str(bin_dir / "slurm_task.py"), str(bin_dir)],
                       env={**env, "SLURMD_NODENAME": "n1"}, capture_output=True, text=True,
                       timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    run_dir = S.record(sp, plan, ["n1"], "42")
    labelled = "".join(f"0: {line}\n" for line in p.stdout.splitlines())
    assert S.unpack(labelled + "0: not base64 at all\n", run_dir) == []  # garbled: no files
    assert S.unpack(labelled, run_dir) == ["n1"]
    files = sorted(f.name for f in (run_dir / "n1").iterdir())
    assert files == sorted(["argv.txt", "counters_after.json", "counters_before.json", "rc",
                            "result.json", "worker.log"])
    assert "--rails-dir" in plan["hosts"]["n1"]["argv"]
    rails = tmp_path / "results" / "rails" / "n1"
    meta = json.loads((run_dir / "run.json").read_text())
    assert (meta["hosts"], meta["master"], meta["slurm_job"]) == (["n1"], "n1", "42")
    report = J.judge(tmp_path / "results", request.build(vars(build_parser("validate").parse_args(
        ["validate", "--launcher", "slurm", "-p", "gpu"]))).policy())
    rc = (run_dir / "n1" / "rc").read_text().strip()
    if importlib.util.find_spec("torch") is not None:
        assert rc == "0", (run_dir / "n1" / "worker.log").read_text()[-2000:]
        # The rail round ran as the role runs it, and its output came back where the role puts
        # it: one host, no HCA, so it says why it has none.
        assert sorted(f.name for f in rails.iterdir()) == ["skipped"]
        assert report.passed and report.world_size == 1 and report.backend == "gloo"
        [rails_check] = [c for c in report.checks if c.name == "rails"]
        assert (rails_check.status, rails_check.reason) == (
            "skip", "no rail round: n1: " + (rails / "skipped").read_text().strip())
    else:  # the worker says so (before any round), and the verdict names the host
        assert rc == "2" and not rails.exists()
        assert not report.hosts[0].passed and "torch" in report.hosts[0].reasons[0]


def test_drain_only_the_hosts_the_verdict_blames() -> None:
    from rdmaprov.validate.report import HostResult, Report
    from rdmaprov.validate.verdict import Bar

    blamed, hung, good, checked = (HostResult("n3"), HostResult("n4"), HostResult("n1"),
                                   HostResult("n2"))
    blamed.fail("slow with every partner (n1+n3 0.006 GB/s, n2+n3 0.006 GB/s; bar 0.2 GB/s)")
    hung.fail("worker hung: killed at the run's timeout", error=True)  # a peer may be the cause
    checked.fail("NCCL fell back to Socket (NET/IB : No device found)")
    checked.fail("GPUDirect RDMA off")
    report = Report(None, None, None, Bar(None, "none"), [], [good, checked, blamed, hung])
    assert S.to_drain(report) == {
        "n2": "validate: NCCL fell back to Socket (NET/IB : No device found); GPUDirect RDMA off",
        "n3": "validate: slow with every partner (n1+n3 0.006 GB/s, n2+n3 0.006 GB/s; bar 0.2 "
              "GB/s)"}


def test_max_jitter_reaches_the_workers_on_live_runs(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """--max-jitter is the limit the workers plan pair rounds with, not only the judge's: it
    rides the role's variables (ansible) and the node spec (slurm) into the worker's argv."""
    from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch as vl

    from rdmaprov.validate import verdict as V

    # slurm: the node's settings carry it, and the role's function turns it into the flag.
    s = spec(tmp_path, "--max-jitter", "2.5", "--pairwise", "auto")["settings"]
    assert s["max_jitter"] == 2.5
    argv = vl.pair_args(s)
    assert argv[argv.index("--max-jitter") + 1] == "2.5"
    # ansible: the fabric play's extra vars carry it as nccl_validate_max_jitter.
    seen: list[dict[str, Any]] = []

    class Done:
        error, hosts = None, {"n1": None}

    monkeypatch.setattr(pipeline, "_play", lambda r, i, extra, h, hosts=None: (
        seen.append(extra), Done())[1])
    monkeypatch.setattr(pipeline, "_failed_before_run", lambda result, dirs: {})
    monkeypatch.setattr(J, "judge", lambda *a, **k: "report")
    args = build_parser("validate").parse_args(["validate", "--max-jitter", "3", "--check"])
    req = request.build(vars(args), options.of(args))

    class Inv:
        selected = ("n1",)

    assert pipeline._live(req, req.run, Inv(), req.policy(), tmp_path, sys.stdout) == "report"
    assert seen[0]["nccl_validate_max_jitter"] == 3.0
    argv = vl.pair_args({"pairs": "auto", "max_jitter": seen[0]["nccl_validate_max_jitter"]})
    assert argv[argv.index("--max-jitter") + 1] == "3.0"
    # The role's default 0 leaves the worker's own default; below 1 is refused, not passed on.
    assert "--max-jitter" not in vl.pair_args({"pairs": "auto", "max_jitter": 0})
    with pytest.raises(ValueError, match="nccl_validate_max_jitter"):
        vl.pair_args({"pairs": "auto", "max_jitter": 0.5})
    # A bad value is one line before any host, from the flags table.
    bad = build_parser("validate").parse_args(["validate", "--max-jitter", "0.5"])
    with pytest.raises(UserError, match="--max-jitter/RDMAPROV_VALIDATE_MAX_JITTER"):
        request.build(vars(bad))
    assert V.DEFAULT_MAX_JITTER >= 1


def test_only_the_role_s_files_and_rail_outputs_come_back(tmp_path: Path) -> None:
    """What a node hands back is unpacked only to the role's places: its FILES under
    fabric/<node>/, rail outputs of safe names under rails/<node>/; nothing else, nowhere else."""
    import base64
    import io

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("n1/rc", "n1/rails/mlx5_0.port1.round1.log", "n1/rails/skipped",
                     "n1/rails/../../escape", "n1/rails/.hidden", "n1/other.txt",
                     "../n2/rc", "n1/rails/sub/x.log"):
            data = name.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    run_dir = tmp_path / "results" / "fabric"
    run_dir.mkdir(parents=True)
    labelled = "".join(f"0: {line}\n" for line in
                       base64.encodebytes(buf.getvalue()).decode().splitlines())
    assert S.unpack(labelled, run_dir) == ["n1"]
    got = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert got == ["results/fabric/n1/rc", "results/rails/n1/mlx5_0.port1.round1.log",
                   "results/rails/n1/skipped"]


def test_rail_names_are_the_roles() -> None:
    """The names the role fetches from <run dir>/rails (validate_launch.RAIL_FILE) are the names
    the Slurm path hands back (slurm_task.RAIL_NAME), and the run's files the same: one rule for
    both launchers (slurm_task.py runs alone on a node, with the standard library only)."""
    from rdmaprov.collection import validate_launch
    from rdmaprov.validate import slurm_task

    assert validate_launch.RAIL_FILE.pattern == slurm_task.RAIL_NAME.pattern
    assert validate_launch.FETCHED == slurm_task.FILES
