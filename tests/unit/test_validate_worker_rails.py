"""The worker's rail round (issue 26): ib_write_bw per rail-aligned HCA pair, run by the same
processes as the sweep, with a shim ib_write_bw on PATH that serves a real TCP rendezvous and
prints real perftest output (tests/fixtures/explain)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.parsers.perftest import parse_perftest
from rdmaprov.validate import judge as J
from rdmaprov.validate import rounds as R
from rdmaprov.validate import verdict as V
from rdmaprov.validate import worker_rails as rails
from rdmaprov.validate.report import RunInfo
from rdmaprov.validate.slurm import worker_files

FIX = Path(__file__).parent.parent / "fixtures" / "explain"

# The shim: a server binds the rail's -p port and waits for one client; a client connects to
# the server's address (a refused connection prints perftest's own words, perftest228) and then
# prints the output of a real 100 GbE RoCE ib_write_bw (DeepOps' record). SHIM_DEAD_HCA: that
# HCA's server never listens, so its client's connection really fails; SHIM_EXIT_HCA: that
# HCA's client prints the whole good table, then exits 3.
SHIM = r'''#!{python}
import json, os, socket, sys
argv = sys.argv[1:]
with open(os.environ["SHIM_LOG"], "a") as f:
    f.write(json.dumps(argv) + "\n")
takes = {{"-d", "-i", "-p", "-s", "-D", "-q", "-x"}}
opts, pos, i = {{}}, [], 0
while i < len(argv):
    if argv[i] in takes:
        opts[argv[i]] = argv[i + 1]
        i += 2
    else:
        (pos.append(argv[i]) if not argv[i].startswith("-") else None)
        i += 1
hca, port, fix = opts["-d"], int(opts["-p"]), os.environ["SHIM_FIXTURES"]
if not pos:
    if hca == os.environ.get("SHIM_DEAD_HCA"):
        print("shim: this server is down (the test's fault)")
        sys.exit(1)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((os.environ.get("SHIM_BIND", "0.0.0.0"), port))
    srv.listen(1)
    print(open(os.path.join(fix, "perftest262_server_roce_gid1.txt")).read(), flush=True)
    srv.settimeout(60)
    conn, _ = srv.accept()
    conn.recv(16)
    conn.close()
    sys.exit(0)
try:
    c = socket.create_connection((pos[0], port), timeout=5)
except OSError:
    print(f"Couldn't connect to {{pos[0]}}:{{port}}")
    print("Unable to open file descriptor for socket connection Unable to init the socket "
          "connection")
    sys.exit(1)
c.sendall(b"hello")
c.close()
print(open(os.path.join(fix, "perftest_deepops_roce_100g.txt")).read())
sys.exit(3 if hca == os.environ.get("SHIM_EXIT_HCA") else 0)
'''

# Ranks posing as hosts h<rank>: those in AS_HOST_HCAS with three ACTIVE 100 GbE RoCE ports (a
# sysfs tree), the others with no RDMA device; each host its own rails directory.
AS_HOST = r'''import os, socket, sys
rank = os.environ["RANK"]
socket.gethostname = lambda: "h" + rank
os.environ["GROUP_RANK"] = rank
sys.path.insert(0, os.getcwd())
import worker
import worker_base
import worker_preflight
import worker_rails
root = sys.argv[1] if rank in os.environ["AS_HOST_HCAS"].split(",") else sys.argv[2]
worker_base._SYS_IB = root
real = worker_preflight._ib_ports
worker_preflight._ib_ports = lambda _root=None: real(root)
if os.environ.get("AS_HOST_LOOPBACK"):  # hosts on one machine: each its own 127.0.0.N
    own = "127.0.0.%d" % (int(rank) + 1)
    os.environ["SHIM_BIND"] = own
    worker_rails._reach_addr = lambda _args: own
args = sys.argv[3:]
i = args.index("--rails-dir")
args[i + 1] = os.path.join(args[i + 1], "h" + rank)
sys.exit(worker.main(args))
'''


def _sysfs(root: Path) -> None:
    for hca in ("mlx5_0", "mlx5_1", "mlx5_2"):
        p = root / hca / "ports" / "1"
        (p / "gid_attrs" / "types").mkdir(parents=True)
        (p / "gids").mkdir()
        (p / "state").write_text("4: ACTIVE\n")
        (p / "rate").write_text("100 Gb/sec (4X EDR)\n")
        (p / "link_layer").write_text("Ethernet\n")
        for idx, kind, gid in (("0", "IB/RoCE v1", "fe80:0000:0000:0000:0000:00ff:fe00:0001"),
                               ("1", "RoCE v2", "fe80:0000:0000:0000:0000:00ff:fe00:0001"),
                               ("3", "RoCE v2", "0000:0000:0000:0000:0000:ffff:0a0a:0b0c")):
            (p / "gid_attrs" / "types" / idx).write_text(kind + "\n")
            (p / "gids" / idx).write_text(gid + "\n")


def test_roce_gid_index_prefers_an_ipv4_roce_v2_gid(tmp_path):
    _sysfs(tmp_path)
    assert rails.roce_gid_index("mlx5_0", 1, str(tmp_path)) == 3
    (tmp_path / "mlx5_0" / "ports" / "1" / "link_layer").write_text("InfiniBand\n")
    assert rails.roce_gid_index("mlx5_0", 1, str(tmp_path)) is None  # IB: no -x


def _run(tmp_path, nproc, hcas, **shim_env):
    """The worker under torchrun, ``nproc`` ranks posing as hosts, those in ``hcas`` with
    HCAs; the shim ib_write_bw first on PATH. Returns (process, rails dir, shim log)."""
    pytest.importorskip("torch")
    img = tmp_path / "img"
    img.mkdir()
    for name, path in worker_files().items():
        shutil.copy(path, img / name)
    (img / "as_host.py").write_text(AS_HOST)
    sysfs, empty, bin_dir, rails = (tmp_path / d for d in ("sys", "none", "bin", "rails"))
    _sysfs(sysfs)
    empty.mkdir()
    bin_dir.mkdir()
    shim = bin_dir / "ib_write_bw"
    shim.write_text(SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "MASTER_"))}
    env.update(PYTHONPATH="", GLOO_SOCKET_IFNAME="lo", PATH=f"{bin_dir}:{env['PATH']}",
               SHIM_LOG=str(tmp_path / "shim.log"), SHIM_FIXTURES=str(FIX),
               AS_HOST_HCAS=",".join(str(h) for h in hcas), **shim_env)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--rdzv-backend=c10d",
           "--rdzv-endpoint=127.0.0.1:0", f"--rdzv-id=rails-test-{os.getpid()}",
           "--local-addr=127.0.0.1", f"--nproc_per_node={nproc}", "as_host.py", str(sysfs),
           str(empty), "--backend", "gloo", "--no-watchdog", "--min-bytes", "64K",
           "--max-bytes", "64K", "--iters", "2", "--warmup", "1", "--rails-dir", str(rails)]
    proc = subprocess.run(cmd, cwd=img, env=env, capture_output=True, text=True, timeout=240)
    return proc, rails, tmp_path / "shim.log"


def test_the_rail_round_runs_each_rail_and_a_failed_rail_is_never_a_pass(tmp_path):
    proc, rails, shim_log = _run(tmp_path, 3, [0, 1], SHIM_DEAD_HCA="mlx5_1",
                                 SHIM_EXIT_HCA="mlx5_2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    summary = doc["rails"]
    assert summary["ran"] and summary["rounds"] == 1
    assert summary["skipped"] == {"h2": "not applicable: no RDMA device"}
    by = {r["client_port"]: r for r in summary["rails"]}
    assert set(by) == {"mlx5_0:1", "mlx5_1:1", "mlx5_2:1"}
    assert [by[p]["rc"] for p in ("mlx5_0:1", "mlx5_1:1", "mlx5_2:1")] == [0, 1, 3]
    assert all(r["client"] == "h0" and r["server"] == "h1" for r in by.values())
    assert all(r["nodes"] == [0, 1] and r["round"] == 1 for r in by.values())  # the judge's ends
    # The argv is rounds.rail_argv's: rail k on port base + k, RoCE v2's IPv4 GID, the server's
    # address last on the client.
    calls = [json.loads(ln) for ln in shim_log.read_text().splitlines()]
    client0 = next(c for c in calls if c[1] == "mlx5_0" and c[-1] == "127.0.0.1")
    assert client0 == R.rail_argv("mlx5_0", 1, 0, server_addr="127.0.0.1", gid_index=3)[1:]
    server1 = next(c for c in calls if c[1] == "mlx5_1" and not c[-1].startswith("127."))
    assert server1 == R.rail_argv("mlx5_1", 1, 1, gid_index=3)[1:]
    # Each host's side of each rail, one file per rail and round (rounds.rail_file), judged by
    # the one rule (verdict.rail_check at 100 Gb/s, with the exit status the judge reads): the
    # good rail passes on both ends; the rail whose connection failed, and the one whose
    # ib_write_bw exited 3 after a good table, fail on both.
    for host in ("h0", "h1"):
        for hca, ok in (("mlx5_0", True), ("mlx5_1", False), ("mlx5_2", False)):
            lines = (rails / host / R.rail_file(hca, 1, 1)).read_text().splitlines()
            rep = parse_perftest(lines)
            check = V.rail_check(host, hca, 1, rep.bw_avg_gbps, 100.0,
                                 failed=J._rail_exit(lines))
            assert (check.status == V.PASS) is ok, (host, hca, lines)
        text = (rails / host / "mlx5_1.port1.round1.log").read_text()
        assert "Couldn't connect to 127.0.0.1:18516" in text
        assert text.rstrip().endswith("rdmaprov: ib_write_bw exit status 1")
        assert parse_perftest((rails / host / "mlx5_2.port1.round1.log").read_text(
            ).splitlines()).bw_avg_gbps == pytest.approx(92.4)  # a figure, and still a fail
        assert not (rails / host / "skipped").exists()
        assert not list((rails / host).glob("*.port1.log"))  # no file of the layout before
    server_copy = (rails / "h1" / "mlx5_0.port1.round1.log").read_text()
    assert server_copy.startswith("rdmaprov: server side of the rail mlx5_0:1 on h0 -> "
                                  "mlx5_0:1 here")
    assert parse_perftest(server_copy.splitlines()).bw_avg_gbps == pytest.approx(92.4)
    # The server's own output is kept beside, under a name the judge does not read as a rail.
    assert (rails / "h1" / "mlx5_0.port1.round1.server").is_file()
    # No rail round on the host without an HCA: the plan's reason, never a figure.
    assert (rails / "h2" / "skipped").read_text() == "not applicable: no RDMA device\n"
    assert sorted(p.name for p in (rails / "h2").iterdir()) == ["skipped"]


def test_two_rounds_on_a_ring_of_four_each_host_keeps_both_its_figures(tmp_path):
    """4 hosts: round 1 h0->h1, h2->h3; round 2 h1->h2, h3->h0 (client->server). Every host is
    a client once and a server once, and keeps both figures, one file per rail and round: its
    own client's output, and the server side's copy of its client's (the judge weighs each end
    against both its partners, verdict.rail_blame)."""
    # Two servers a round on one machine: each pretend host binds its own loopback address.
    proc, rails, _ = _run(tmp_path, 4, [0, 1, 2, 3], AS_HOST_LOOPBACK="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)["rails"]
    assert summary["rounds"] == 2 and summary["skipped"] == {}
    got = sorted({(r["round"], r["client"], r["server"]) for r in summary["rails"]})
    assert got == [(1, "h0", "h1"), (1, "h2", "h3"), (2, "h1", "h2"), (2, "h3", "h0")]
    assert all(r["rc"] == 0 for r in summary["rails"]) and len(summary["rails"]) == 12
    client_in = {"h0": 1, "h2": 1, "h1": 2, "h3": 2}
    for host in ("h0", "h1", "h2", "h3"):
        for hca in ("mlx5_0", "mlx5_1", "mlx5_2"):
            for number in (1, 2):
                name = R.rail_file(hca, 1, number)
                assert J._RAIL_FILE.match(name)["round"] == str(number)  # the judge reads it
                lines = (rails / host / name).read_text().splitlines()
                server = number != client_in[host]
                assert lines[0].startswith("rdmaprov: server side") is server, (host, name)
                rep = parse_perftest(lines)
                assert V.rail_check(host, hca, 1, rep.bw_avg_gbps, 100.0,
                                    failed=J._rail_exit(lines)).status == V.PASS
        assert sorted(p.name for p in (rails / host).glob("*.log")) == sorted(
            R.rail_file(h, 1, n) for h in ("mlx5_0", "mlx5_1", "mlx5_2") for n in (1, 2))
    # The summary names each round's two ends by node rank: h3 met h2 (round 1) and h0.
    ends = sorted((r["round"], r["nodes"][0], r["nodes"][1]) for r in summary["rails"]
                  if r["client_port"] == "mlx5_0:1")
    assert ends == [(1, 0, 1), (1, 2, 3), (2, 1, 2), (2, 3, 0)]
    servers = sorted(p.parent.name + "/" + p.name.split(".")[2]
                     for p in rails.glob("*/mlx5_0.port1.round*.server"))
    assert servers == ["h0/round2", "h1/round1", "h2/round2", "h3/round1"]


def test_a_live_run_judges_only_its_own_rails_and_the_socket_run_has_none(tmp_path, monkeypatch):
    """An earlier run's rails/ in --results is cleared before the run (it would be judged
    again); --compare-socket's second play passes nccl_validate_rails never."""
    from rdmaprov.validate import pipeline, request

    real_live = pipeline._live
    results = tmp_path / "results"
    (results / "rails" / "gone").mkdir(parents=True)
    (results / "rails" / "gone" / "mlx5_0.port1.log").write_text("old\n")
    (results / "keep").mkdir()  # not a run: left alone
    seen = {}

    class Ran:
        hosts: tuple = ()
        run = RunInfo()

    def live(req, run, inv, pol, res, human):
        seen["left"] = sorted(p.name for p in res.iterdir())
        return Ran

    monkeypatch.setattr(pipeline, "_live", live)
    monkeypatch.setattr(pipeline.inventory_mod, "load", lambda *a, **k: None)
    monkeypatch.setattr(pipeline, "write_outputs", lambda *a: None)
    monkeypatch.setattr(pipeline.record, "save", lambda *a: None)
    req = request.build({"inventory": tmp_path / "inv.ini", "results": results})
    assert pipeline.execute(req, sys.stdout) is Ran
    assert seen["left"] == ["keep"]

    plays: list[dict] = []

    class Done:
        error, hosts = None, {"n1": None}

    class Report:
        error = None

    monkeypatch.setattr(pipeline, "_play", lambda run, i, extra, h, hosts=None: (
        plays.append(extra), Done())[1])
    monkeypatch.setattr(pipeline, "_failed_before_run", lambda result, dirs: {})
    monkeypatch.setattr(J, "judge", lambda *a, **k: Report())
    req = request.build({"inventory": Path("x.ini"), "compare_socket": True})

    class Inv:
        selected = ("n1",)

    real_live(req, req.run, Inv(), req.policy(), tmp_path, sys.stdout)
    assert len(plays) == 2
    assert "nccl_validate_rails" not in plays[0]  # the fabric run: the role's default, auto
    assert plays[1]["nccl_validate_rails"] == "never"
