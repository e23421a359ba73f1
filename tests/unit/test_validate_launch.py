"""The validation launch (plugins/module_utils/validate_launch.py, what the nccl_validate role
runs through its filters): pair rounds, rendezvous address, the argv on a host or in a
container, the image preflight's verdict, and the early stop of a run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from rdmaprov.collection import validate_launch as vl

ROOT = Path(__file__).resolve().parents[2]


def settings(**over):
    base = {"runtime": "host", "engine": "none", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
            "python": "python3", "pythonpath": [], "container_args": [], "memlock": "unlimited",
            "devices": [], "gpus": "auto", "gpu_count": 0, "backend": "nccl",
            "launcher": "torchrun", "nproc": 8, "worker_args": [], "rendezvous_timeout": 120,
            "env": {}, "nccl_debug": "INFO", "nccl_debug_subsys": "INIT,NET,ENV", "auto_env": {},
            "remote_dir": "/var/tmp/rv", "rdma_mounts": [], "torch_libuv": True}
    base.update(over)
    return base


def worker_part(argv):
    """The argv after the counters wrapper (sh -c SCRIPT DIR BIN ...)."""
    i = argv.index("sh")
    return argv[i + 5:]


def test_fabric_members_put_the_rendezvous_host_first():
    assert vl.fabric_members(["a", "b", "c"], "b") == ["b", "a", "c"]
    with pytest.raises(ValueError, match="rendezvous host x is not in this play"):
        vl.fabric_members(["a"], "x")


# --- rendezvous address -----------------------------------------------------------------------

PROBE = {"addresses": {"lo": ["127.0.0.1"], "eth0": ["192.0.2.2"], "ib0": ["10.10.0.5"]},
         "ssh_server_addr": "192.0.2.2"}


def test_own_address_order():
    assert vl.own_address("10.0.0.7", PROBE, {}) == ("10.0.0.7", "ansible_host")
    assert vl.own_address("gpu7.example", PROBE, {"NCCL_SOCKET_IFNAME": "ib"}) == (
        "10.10.0.5", "ib0 (NCCL_SOCKET_IFNAME)")
    assert vl.own_address("gpu7", PROBE, {"GLOO_SOCKET_IFNAME": "=eth0"})[0] == "192.0.2.2"
    assert vl.own_address("gpu7", PROBE, {"NCCL_SOCKET_IFNAME": "^eth,ib"})[0] == "192.0.2.2"
    assert vl.own_address("gpu7", PROBE, {}) == ("192.0.2.2", "SSH connection")
    # ansible_connection=local: no SSH_CONNECTION, a name that resolves nowhere.
    addr, why = vl.own_address("h200", {"addresses": {"eth0": ["192.0.2.2"]}}, {})
    assert addr is None and "not an IP address" in why


def test_rendezvous_address():
    master = {"name": "h200", "own_addr": None, "own_addr_from": "no way"}
    assert vl.rendezvous_address(["h200"], "", master) == "127.0.0.1"
    assert vl.rendezvous_address(["a", "b"], "10.9.9.9", master) == "10.9.9.9"
    assert vl.rendezvous_address(["a", "b"], "", {**master, "own_addr": "10.0.0.1"}) == "10.0.0.1"
    with pytest.raises(ValueError, match="no rendezvous address for h200: no way"):
        vl.rendezvous_address(["h200", "b"], "", master)


# --- the argv ---------------------------------------------------------------------------------

def test_torchrun_on_the_host():
    plan = vl.launch(settings(), "fabric", ["a", "b", "c"], "c", "10.0.0.1", 29500)
    argv = plan["argv"]
    assert argv[:2] == ["sh", "-c"]  # host runtime: no engine in front
    assert argv[3:5] == ["/var/tmp/rv/fabric", "/var/tmp/rv/bin"]
    assert worker_part(argv) == [
        "python3", "-m", "torch.distributed.run", "--nnodes=3", "--node-rank=2",
        "--nproc-per-node=8", "--master-addr=10.0.0.1", "--master-port=29500",
        "--max-restarts=0", "--rdzv-conf=timeout=120", "/var/tmp/rv/bin/worker.py",
        "--backend", "nccl", "--timeout", "120"]
    assert plan["rank"] == 2 and plan["nnodes"] == 3 and plan["container"] is None
    assert plan["env"]["NCCL_DEBUG"] == "INFO" and plan["env"]["RDMAPROV_VALIDATE_RUN"] == "fabric"
    assert "USE_LIBUV" not in plan["env"]


def test_direct_launcher_and_its_limit():
    s = settings(launcher="direct", nproc=1, backend="gloo", worker_args=["--max-bytes", "4M"])
    argv = worker_part(vl.launch(s, "pair-a-b", ["a", "b"], "b", "10.0.0.1", 29500)["argv"])
    assert argv == ["python3", "/var/tmp/rv/bin/worker.py", "--rank", "1", "--world-size", "2",
                    "--master-addr", "10.0.0.1", "--master-port", "29500", "--backend", "gloo",
                    "--timeout", "120", "--max-bytes", "4M"]
    with pytest.raises(ValueError, match="one process per host, but 8"):
        vl.launch(settings(launcher="direct"), "fabric", ["a"], "a", "127.0.0.1", 29500)
    with pytest.raises(ValueError, match="not a member"):
        vl.launch(settings(), "fabric", ["a"], "z", "127.0.0.1", 29500)


def test_torch_without_libuv_gets_use_libuv_0_with_torchrun_only():
    env = vl.launch(settings(torch_libuv=False), "fabric", ["a"], "a", "127.0.0.1", 1)["env"]
    assert env["USE_LIBUV"] == "0"
    env = vl.launch(settings(torch_libuv=False, launcher="direct", nproc=1), "fabric", ["a"], "a",
                    "127.0.0.1", 1)["env"]
    assert "USE_LIBUV" not in env  # the direct launcher's tcp:// init has no libuv store to ask
    # The user's env has the last word.
    env = vl.launch(settings(torch_libuv=False, env={"USE_LIBUV": "1", "NCCL_IB_HCA": "mlx5"}),
                    "fabric", ["a"], "a", "127.0.0.1", 1)["env"]
    assert env["USE_LIBUV"] == "1" and env["NCCL_IB_HCA"] == "mlx5"


@pytest.mark.parametrize(("engine", "gpu"), [("podman", ["--device", "nvidia.com/gpu=all"]),
                                             ("docker", ["--gpus", "all"])])
def test_container_has_what_rdma_needs_and_nothing_more(engine, gpu):
    s = settings(runtime="container", engine=engine, gpu_count=8,
                 devices=["/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"],
                 pythonpath=["/opt/t"], env={"NCCL_IB_HCA": "mlx5"},
                 rdma_mounts=["-v=/usr/lib/x86_64-linux-gnu/libibverbs.so.1:"
                              "/usr/lib/x86_64-linux-gnu/libibverbs.so.1:ro"],
                 container_args=["--pids-limit=-1"])
    plan = vl.launch(s, "fabric", ["a", "b"], "a", "10.0.0.1", 29500)
    argv = plan["argv"]
    line = shlex.join(argv)
    assert argv[:3] == [engine, "run", "--rm"]
    for part in ("--name rdmaprov-validate-fabric", "--pull never", "--network host",
                 "--ipc host", "--cap-add IPC_LOCK", "--ulimit memlock=-1:-1",
                 "-v /var/tmp/rv:/var/tmp/rv", "-v=/opt/t:/opt/t:ro",
                 "--device=/dev/infiniband/uverbs0", "--device=/dev/infiniband/rdma_cm",
                 "--env=NCCL_IB_HCA", "--env=NCCL_DEBUG", "--pids-limit=-1",
                 "libibverbs.so.1:/usr/lib/x86_64-linux-gnu/libibverbs.so.1:ro"):
        assert part in line, part
    assert any(argv[i:i + 2] == gpu for i in range(len(argv)))
    assert "--privileged" not in argv
    assert "NCCL_IB_HCA=mlx5" not in line  # values stay in the environment, not in argv.txt
    image = argv.index("nvcr.io/nvidia/pytorch:25.01-py3")
    assert argv[image + 1:image + 3] == ["sh", "-c"]  # the image, then the counters wrapper
    assert plan["container"] == "rdmaprov-validate-fabric"


@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_container_through_the_rdma_cdi_device_gets_nothing_by_hand(engine):
    s = settings(runtime="container", engine=engine, gpu_count=0, memlock="host",
                 devices=["/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"],
                 cdi_device="rdmaprov.io/rdma=all")
    argv = vl.launch(s, "fabric", ["a"], "a", "127.0.0.1", 1)["argv"]
    image = argv.index("nvcr.io/nvidia/pytorch:25.01-py3")
    head = argv[:image]
    assert head[head.index("--device") + 1] == "rdmaprov.io/rdma=all"
    assert not any(a.startswith("--device=") for a in head)  # no hand-built device list
    assert "IPC_LOCK" not in head and "--privileged" not in head
    # docker has no --ulimit host: its containers get the daemon's limits when none is given.
    assert (("--ulimit" in head) is (engine == "podman"))


def test_container_without_gpus_or_engine():
    s = settings(runtime="container", engine="podman", gpu_count=0, memlock="host")
    argv = vl.launch(s, "fabric", ["a"], "a", "127.0.0.1", 1)["argv"]
    assert "nvidia.com/gpu=all" not in argv and "--gpus" not in argv
    assert argv[argv.index("--ulimit") + 1] == "host"
    assert "nvidia.com/gpu=all" in vl.launch({**s, "gpus": "all"}, "fabric", ["a"], "a",
                                             "127.0.0.1", 1)["argv"]
    with pytest.raises(ValueError, match="no container engine"):
        vl.launch({**s, "engine": "none"}, "fabric", ["a"], "a", "127.0.0.1", 1)


def test_counters_wrapper_runs_around_the_worker():
    argv = vl.launch(settings(python="/opt/py 3/python"), "fabric", ["a"], "a", "127.0.0.1", 1)[
        "argv"]
    script = argv[2]
    assert script.index("counters_before.json") < script.index('"$@"') < script.index(
        "counters_after.json")
    assert "py='/opt/py 3/python'" in script and script.endswith("exit $rc")


def test_preflight_argv_uses_the_runs_container():
    s = settings(runtime="container", engine="podman", devices=["/dev/infiniband/uverbs0"])
    pf = vl.preflight_argv(s, "fabric")
    assert pf["argv"][:6] == ["timeout", "-k", "10", "120", "podman", "run"]
    assert "--device=/dev/infiniband/uverbs0" in pf["argv"]
    assert "--name" in pf["argv"] and "rdmaprov-validate-fabric-preflight" in pf["argv"]
    assert pf["argv"][-5:] == ["python3", "/var/tmp/rv/bin/worker.py", "--preflight",
                               "--backend", "nccl"]
    assert vl.preflight_argv(settings(), "fabric")["argv"][4] == "python3"


# --- the host's rdma-core ---------------------------------------------------------------------

RDMA = {"libs": {"libibverbs.so.1": "/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
                 "libmlx5.so.1": "/usr/lib/x86_64-linux-gnu/libmlx5.so.1"},
        "providers": "/usr/lib/x86_64-linux-gnu/libibverbs", "config": "/etc/libibverbs.d"}


def test_host_rdma_mounts_read_only_at_the_hosts_paths():
    mounts, why = vl.host_rdma_decision("auto", False, RDMA)
    assert why == "the image has no libibverbs.so.1"
    assert mounts == ["-v=/usr/lib/x86_64-linux-gnu/libibverbs.so.1:"
                      "/usr/lib/x86_64-linux-gnu/libibverbs.so.1:ro",
                      "-v=/usr/lib/x86_64-linux-gnu/libmlx5.so.1:"
                      "/usr/lib/x86_64-linux-gnu/libmlx5.so.1:ro",
                      "-v=/usr/lib/x86_64-linux-gnu/libibverbs:"
                      "/usr/lib/x86_64-linux-gnu/libibverbs:ro",
                      "-v=/etc/libibverbs.d:/etc/libibverbs.d:ro"]
    assert vl.host_rdma_decision("auto", True, RDMA)[0] == []
    assert vl.host_rdma_decision("never", False, RDMA)[0] == []
    assert vl.host_rdma_decision("always", True, RDMA)[0] == mounts
    assert vl.host_rdma_decision("auto", False, {"libs": {"libibverbs.so.1": None}})[0] == []
    with pytest.raises(ValueError, match=r"this host has no libibverbs\.so\.1"):
        vl.host_rdma_decision("always", True, {"libs": {}})
    with pytest.raises(ValueError, match="auto, always or never"):
        vl.host_rdma_decision("sometimes", True, RDMA)


# --- the image preflight's verdict ------------------------------------------------------------

def pf_doc(**pf):
    base = {"libibverbs": "libibverbs.so.1", "hcas": ["mlx5_0", "mlx5_1"], "verbs_devices": 2}
    base.update(pf)
    return {"backend": "nccl", "torch": {"error": None, "version": "2.6", "cuda_devices": 8},
            "preflight": base}


def test_preflight_failure_lines():
    assert vl.preflight_failure(pf_doc(), True) == ""
    assert vl.preflight_failure(pf_doc(libibverbs=None, verbs_devices=None), True).startswith(
        "2 HCA(s) (mlx5_0, mlx5_1) but libibverbs.so.1 does not load")
    assert vl.preflight_failure(pf_doc(verbs_devices=1), True).startswith(
        "libibverbs lists 1 of 2 HCA(s) (mlx5_0, mlx5_1): no provider")
    # IB not required (a socket run), or no HCA at all: not failed here, the run shows Socket.
    assert vl.preflight_failure(pf_doc(libibverbs=None), False) == ""
    assert vl.preflight_failure(pf_doc(libibverbs=None, hcas=[]), True) == ""
    doc = pf_doc()
    doc["torch"] = {"error": "ModuleNotFoundError: No module named 'torch'"}
    assert vl.preflight_failure(doc, False) == (
        "torch is not importable: ModuleNotFoundError: No module named 'torch'")
    doc = pf_doc()
    doc["torch"]["cuda_devices"] = 0
    assert vl.preflight_failure(doc, False) == "backend nccl, but torch sees no CUDA device"
    assert vl.preflight_failure(None, True) == "image preflight printed no JSON document"


def test_require_ib():
    assert vl.require_ib("nccl", "auto", {}) is True
    assert vl.require_ib("nccl", "auto", {"NCCL_IB_DISABLE": "1"}) is False
    assert vl.require_ib("gloo", "auto", {}) is False
    assert vl.require_ib("gloo", "always", {}) is True
    assert vl.require_ib("nccl", "never", {}) is False
    with pytest.raises(ValueError):
        vl.require_ib("nccl", "yes", {})


# --- stopping a run early ---------------------------------------------------------------------

def test_a_peer_that_could_not_run_stops_the_others(tmp_path):
    exits = str(tmp_path / "fabric" / ".exits")
    members = ["a", "b", "c"]
    running = {"finished": 0}
    assert vl.watch(running, exits, "a", members) is False
    # b's worker failed in a collective (rc 1): its partners end on their own timeouts.
    assert vl.watch({"finished": 1, "stdout": "1\n"}, exits, "b", members) is True
    assert vl.watch(running, exits, "a", members) is False
    # c could not start (rc 2: no torch): a stops at once, saying who and why.
    assert vl.watch({"finished": 1, "stdout": "2\n"}, exits, "c", members) is True
    assert vl.watch(running, exits, "a", members) is True
    assert vl.stop_reason(exits, "a", members) == "stopped: c could not run (its worker exited 2)"
    assert vl.stop_reason(exits, "c", members) == ""  # one's own exit is not a reason


@pytest.mark.parametrize(("rc", "stops"), [(0, False), (1, False), (2, True), (3, True),
                                           (124, False), (125, True), (127, True)])
def test_which_exit_codes_stop_the_peers(tmp_path, rc, stops):
    exits = str(tmp_path)
    vl.watch({"finished": 1, "stdout": f"noise\n{rc}\n"}, exits, "b", ["a", "b"])
    assert bool(vl.stop_reason(exits, "a", ["a", "b"])) is stops


@pytest.mark.parametrize(("worker_rc", "rank_file", "rc"), [(1, "3", 3), (1, "2", 2), (1, "1", 1),
                                                             (0, "3", 0), (1, None, 1)])
def test_wrapper_keeps_the_workers_own_exit_code(tmp_path, worker_rc, rank_file, rc):
    """torchrun exits 1 for any failed worker; the wrapper takes the worker's 2 or 3 back."""
    import subprocess
    import sys

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "rdma_ports.py").write_text("print('{\"ports\": []}')\n")
    run = tmp_path / "fabric"
    run.mkdir()
    argv = vl.launch(settings(python=sys.executable, remote_dir=str(tmp_path)), "fabric", ["a"],
                     "a", "127.0.0.1", 1)["argv"]
    write = f"echo {rank_file} > worker-rc.0; " if rank_file else ""
    fake = ["sh", "-c", f"{write}exit {worker_rc}"]
    proc = subprocess.run([*argv[:5], *fake], capture_output=True, text=True, timeout=60)
    assert proc.returncode == rc, proc.stderr
    assert (run / "counters_before.json").read_text() == '{"ports": []}\n'
    assert (run / "counters_after.json").is_file()


# --- the port reader the launch runs before and after (plugins/module_utils/rdma_ports.py) ----

def _counters():
    from rdmaprov.collection import rdma_ports

    return rdma_ports


@pytest.mark.parametrize(("text", "gbps"), [("400 Gb/sec (4X NDR)", 400),
                                            ("200 Gb/sec (4X HDR)", 200),
                                            ("25 Gb/sec (1X EDR)", 25),
                                            ("2.5 Gb/sec (1X SDR)", 2.5), ("", None), (None, None),
                                            ("unknown", None)])
def test_counters_rate_gbps(text, gbps):
    assert _counters().parse_rate(text) == gbps


def test_counters_netdev(tmp_path):
    c = _counters()
    # RoCE: the GID table names the netdev; IB (IPoIB) or an empty table: the device's net/ dir.
    roce = tmp_path / "mlx5_0" / "ports" / "1"
    (roce / "gid_attrs" / "ndevs").mkdir(parents=True)
    (roce / "gid_attrs" / "ndevs" / "0").write_text("ens1f0np0\n")
    assert c.port_netdev(str(tmp_path), "mlx5_0", 1) == "ens1f0np0"
    ib = tmp_path / "mlx5_1" / "ports" / "1"
    ib.mkdir(parents=True)
    (tmp_path / "mlx5_1" / "device" / "net" / "ibp65s0").mkdir(parents=True)
    assert c.port_netdev(str(tmp_path), "mlx5_1", 1) == "ibp65s0"
    bare = tmp_path / "mlx5_2" / "ports" / "1"
    bare.mkdir(parents=True)
    assert c.port_netdev(str(tmp_path), "mlx5_2", 1) is None
    # A dual-port function with two netdevs: each port gets the one whose dev_port is port-1
    # (the counters script used to give both ports the first).
    for name, dev_port in (("ibp65s0f0", "0"), ("ibp65s0f1", "1")):
        d = tmp_path / "mlx5_3" / "device" / "net" / name
        d.mkdir(parents=True)
        (d / "dev_port").write_text(dev_port + "\n")
    for port in (1, 2):
        (tmp_path / "mlx5_3" / "ports" / str(port)).mkdir(parents=True)
    assert [c.port_netdev(str(tmp_path), "mlx5_3", p) for p in (1, 2)] == ["ibp65s0f0",
                                                                          "ibp65s0f1"]


def test_pair_rounds_ride_in_the_fabric_run():
    """Pair rounds are worker arguments of the one fabric launch, not playbook passes."""
    from ansible_collections.rdmaprov.cluster.plugins.module_utils import validate_launch as vl

    assert vl.pair_args({"pairs": "never"}) == []
    assert vl.pair_args({"pairs": "auto", "pair_fraction": 0.5, "bw_fraction": 0.7,
                         "min_busbw": 0}) == ["--pairs", "auto", "--bw-fraction", "0.7",
                                              "--pair-fraction", "0.5"]
    assert vl.pair_args({"pairs": "always", "min_busbw": 20.0})[-2:] == ["--min-busbw", "20.0"]


def test_the_rail_round_rides_in_the_fabric_run_when_asked():
    """nccl_validate_rails auto: the worker runs the rail round into the run's own rails/ (the
    role fetches it); absent (the Slurm launch) or never: no rail round."""
    plan = vl.launch(settings(rails="auto"), "fabric", ["a", "b"], "b", "10.0.0.1", 29500)
    assert worker_part(plan["argv"])[-2:] == ["--rails-dir", "/var/tmp/rv/fabric/rails"]
    plan = vl.launch(settings(rails="auto", rail_cuda=True), "fabric", ["a", "b"], "a",
                     "10.0.0.1", 29500)
    assert worker_part(plan["argv"])[-3:] == ["--rails-dir", "/var/tmp/rv/fabric/rails",
                                              "--rail-cuda"]
    for s in (settings(), settings(rails="never")):
        assert "--rails-dir" not in vl.launch(s, "socket", ["a", "b"], "a", "10.0.0.1",
                                              29500)["argv"]
    with pytest.raises(ValueError, match="nccl_validate_rails"):
        vl.launch(settings(rails="sometimes"), "fabric", ["a"], "a", "127.0.0.1", 29500)


# --- steps.log: where each part of a failed run got to --------------------------------------------

def test_steps_summary_names_each_ranks_last_step_and_the_exits():
    text = ("100.0 launch start\n101.5 rank0 start\n102.0 rank0 import torch\n"
            "105.2 rank0 rendezvous at env://\n225.9 rank0 exit 1\n226.4 launch exit 1\n")
    assert vl.steps_summary(text) == ("rank0: last step 'rendezvous at env://' at +5 s, exit 1 "
                                      "at +126 s; launch exit 1 at +126 s")


def test_steps_summary_orders_ranks_by_number_and_says_a_launch_that_never_ended():
    text = ("10 launch start\n11 rank10 import torch\n11 rank2 import torch\n"
            "12 rank2 all_reduce of 65536 bytes\nnot a line\n13 rank10 exit 3\n")
    assert vl.steps_summary(text) == (
        "rank2: last step 'all_reduce of 65536 bytes' at +2 s; rank10: last step 'import torch' "
        "at +1 s, exit 3 at +3 s; the launch never exited (its host lost or the wait given up)")


@pytest.mark.parametrize(("launch", "says"), [("125", True), ("127", True), ("1", False)])
def test_steps_summary_puts_an_engine_failure_after_a_good_worker_first(launch, says):
    text = f"0 launch start\n1 rank0 document printed\n2 rank0 exit 0\n3 launch exit {launch}\n"
    out = vl.steps_summary(text)
    assert out.startswith(f"the launch exited {launch} after every rank exited 0") is says, out
    assert out.endswith(f"launch exit {launch} at +3 s")


def test_steps_summary_of_nothing_is_empty():
    assert vl.steps_summary("") == "" and vl.steps_summary(None) == ""
    # Without the launch's start (a worker run by hand) the steps carry no times.
    assert vl.steps_summary("5 rank0 barrier\n") == "rank0: last step 'barrier'"


# --- the rendezvous port: another program listening there fails the launch ---------------------

def test_port_held_by_another_program_is_named_with_what_to_do() -> None:
    holders = [{"pid": 812, "name": "python3", "cmdline": "python3 -c import socket; s.bind(...)"}]
    msg = vl.rendezvous_port_problem(29500, holders, "/var/tmp/rdmaprov-validate")
    assert msg.startswith("the rendezvous port 29500 is already in use on this host by python3 "
                          "(pid 812: python3 -c import socket; s.bind(...)): ")
    assert "nccl_validate_master_port" in msg and "firewall_rendezvous_ports" in msg


def test_port_free_or_held_by_our_own_earlier_launch_is_no_problem() -> None:
    ours = {"pid": 9, "name": "python3", "cmdline": "/usr/bin/python3 -m torch.distributed.run "
            "--nnodes=1 /var/tmp/rdmaprov-validate/bin/worker.py --max-bytes 4M"}
    assert vl.rendezvous_port_problem(29500, [], "/var/tmp/rdmaprov-validate") == ""
    assert vl.rendezvous_port_problem(29500, [ours], "/var/tmp/rdmaprov-validate") == ""
    # Another directory's worker is not ours (another checkout, another user's run).
    assert "pid 9" in vl.rendezvous_port_problem(29500, [ours], "/srv/rdmaprov")


def test_port_holder_hidden_and_long_command_lines() -> None:
    hidden = vl.rendezvous_port_problem(29500, [{"pid": None, "name": "?", "cmdline": ""}], "/x")
    assert "by a process this user cannot see:" in hidden
    long = vl.rendezvous_port_problem(
        29500, [{"pid": 1, "name": "java", "cmdline": "java " + "-Dx=y " * 40}], "/x")
    cmd = long.split("(pid 1: ", 1)[1].split("):", 1)[0]
    assert len(cmd) == 80 and cmd.endswith("\u2026")


# --- the rendezvous host must hold the rendezvous address --------------------------------------

def _probe_route():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "plugins/modules/nccl_validate_probe.py"
    spec = importlib.util.spec_from_file_location("nccl_validate_probe_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.route


def test_an_address_the_rendezvous_host_holds_is_fine() -> None:
    """On this machine's real routing: its own addresses (loopback and the one it reaches the
    world from) are sourced from themselves."""
    route = _probe_route()
    own = route("192.0.2.123")["source"] or "127.0.0.1"  # whatever address this host holds
    for addr in ("127.0.0.1", own):
        r = route(addr)
        assert r["error"] is None and r["source"] == addr, r
        assert vl.rendezvous_addr_problem(r, "node1") == ""


def test_an_address_nobody_on_the_host_holds_is_named() -> None:
    """The lab's case: nccl_validate_master_addr set to an address of the subnet that no node
    holds; every peer waited the rendezvous timeout (165 s in the suite) for nobody."""
    route = _probe_route()
    r = route("192.0.2.200")
    if r["error"]:  # no route at all here: the routes assert names it already
        assert vl.rendezvous_addr_problem(r, "node1") == ""
        return
    assert r["source"] != "192.0.2.200"
    msg = vl.rendezvous_addr_problem(r, "node1")
    assert msg == (f"not an address of node1, the rendezvous host, which listens on it (from "
                   f"here it is another host, reached from {r['source']}): set "
                   "nccl_validate_master_addr to an address node1 holds, or leave it unset")


def test_the_rule_on_a_recorded_route() -> None:
    """Whatever this machine's routes: the lab's route from node1 to an address nobody holds."""
    r = {"address": "10.0.0.200", "source": "10.0.0.11", "error": None}
    assert vl.rendezvous_addr_problem(r, "node1").startswith(
        "not an address of node1, the rendezvous host, which listens on it (from here it is "
        "another host, reached from 10.0.0.11)")


@pytest.mark.parametrize("r", [
    {"address": None, "source": None, "error": "cannot resolve x: [Errno -2]"},
    {"address": "10.0.0.9", "source": None, "error": "no route to 10.0.0.9: Network unreachable"},
    {"address": "10.0.0.9", "source": "10.0.0.9", "error": None},
])
def test_no_second_error_where_the_route_probe_has_one_or_the_address_is_local(r) -> None:
    assert vl.rendezvous_addr_problem(r, "node1") == ""


# --- the preflight's plan (nccl_validate_probe, option settings) -------------------------------

DEFAULTS = yaml.safe_load((ROOT / "roles/nccl_validate/defaults/main.yml").read_text())


def role_settings(**over):
    """The role's defaults as preflight.yml passes them to the probe (vl.PLAN_KEYS)."""
    defaults = DEFAULTS
    base = {k: defaults[f"nccl_validate_{k}"] for k in vl.PLAN_KEYS
            if f"nccl_validate_{k}" in defaults}
    base.update(hosts=["a", "b", "c"], host="b", address="10.0.0.2")
    base["master_port"] = defaults["nccl_validate_master_port"]
    base["env_override"] = {}
    base.update(over)
    return base


HOST = {"engine": "podman", "gpu_count": 8, "ib_devices": ["/dev/infiniband/uverbs0"],
        "rdma": RDMA, "addresses": {"eth1": ["10.0.0.2"]},
        "ssh_server_addr": "192.0.2.2", "local_ifname": "eth1",
        "cdi": {"spec": "/etc/cdi/rdmaprov-rdma.yaml", "exists": True, "engine_cdi": True}}


def test_every_plan_key_is_a_role_variable_or_the_plays():
    defaults = DEFAULTS
    play = {"hosts", "host", "address"}
    assert {k for k in vl.PLAN_KEYS if f"nccl_validate_{k}" not in defaults} == play
    # The probe's action fills every other key from its variable (tests/unit/test_role_settings.py).


def test_plan_of_a_gpu_host_in_a_container():
    p = vl.plan(role_settings(), HOST)
    assert p["members"] == ["a", "b", "c"] and p["refuse"] == []
    assert p["own"] == ["10.0.0.2", "ansible_host"]
    s = p["settings"]
    assert s["nproc"] == 8 and s["gpu_count"] == 8 and s["engine"] == "podman"
    assert s["cdi_device"] == "rdmaprov.io/rdma=all"  # the engine reads CDI specs
    assert s["devices"] == ["/dev/infiniband/uverbs0"]
    assert s["auto_env"] == {"GLOO_SOCKET_IFNAME": "eth1"}
    assert s["require_ib"] is True and s["rail_cuda"] is False
    assert (s["host"], s["members"], s["master_port"], s["label"]) == ("b", ["a", "b", "c"],
                                                                        29500, "fabric")
    assert s["rdma_mounts"] == [] and s["torch_libuv"] is None
    # What plan() hands on is what launch() takes.
    argv = vl.launch(s, "fabric", p["members"], "b", "10.0.0.1", 29500)["argv"]
    assert argv[:2] == ["podman", "run"] and "--nproc-per-node=8" in argv


def test_plan_rendezvous_host_first_and_its_absence():
    assert vl.plan(role_settings(master_host="c"), HOST)["members"] == ["c", "a", "b"]
    with pytest.raises(ValueError, match="rendezvous host x is not in this play"):
        vl.plan(role_settings(master_host="x"), HOST)


def test_plan_settings_from_the_host_and_the_role():
    host = {**HOST, "gpu_count": 0, "local_ifname": "lo", "cdi": {"engine_cdi": False}}
    s = vl.plan(role_settings(backend="gloo", devices=["/dev/x"], rail_cuda="yes",
                              env={"NCCL_IB_DISABLE": "0"}, env_override={"NCCL_IB_DISABLE": "1"},
                              require_ib="auto"), host)["settings"]
    assert s["nproc"] == 1 and s["devices"] == ["/dev/x"] and s["auto_env"] == {}
    assert s["cdi_device"] == ""  # docker < 25: the devices one by one
    assert s["rail_cuda"] is True
    assert s["env"] == {"NCCL_IB_DISABLE": "1"} and s["require_ib"] is False
    assert vl.plan(role_settings(nproc_per_node=2), host)["settings"]["nproc"] == 2
    assert vl.plan(role_settings(), host)["settings"]["nproc"] == 1  # nccl without GPUs: 1
    # The own address reads nccl_validate_env, not the one run's override.
    p = vl.plan(role_settings(address="gpu2", env={"NCCL_SOCKET_IFNAME": "eth"},
                              env_override={"NCCL_SOCKET_IFNAME": "ib"}), host)
    assert p["own"] == ["10.0.0.2", "eth1 (NCCL_SOCKET_IFNAME)"]


def test_plan_refusals_in_order():
    none = {**HOST, "engine": "none", "cdi": {"exists": False, "engine_cdi": True}}
    refuse = vl.plan(role_settings(launcher="direct"), none)["refuse"]
    assert refuse == [
        "no container engine: neither podman nor docker is installed (set it up with the "
        "container_runtime role, or use nccl_validate_runtime: host)",
        "RDMA CDI spec /etc/cdi/rdmaprov-rdma.yaml is missing on this host "
        "(rdmaprov.io/rdma=all cannot be given to the container): run bootstrap "
        "(container_runtime role), or set nccl_validate_cdi_device to ''",
        "launcher direct runs one process per host, but 8 are wanted (this host has 8 GPUs): "
        "use nccl_validate_launcher: torchrun"]
    assert vl.plan(role_settings(engine="docker"), none)["refuse"][0].startswith(
        "no container engine: docker is installed")
    # The host runtime needs no engine; no CDI device asked for: no spec needed.
    assert vl.plan(role_settings(runtime="host", cdi_device=""),
                   {**none, "cdi": {}})["refuse"] == []
    assert vl.plan(role_settings(launcher="direct", nproc_per_node=1), HOST)["refuse"] == []


def test_rendezvous_of_a_run():
    assert vl.rendezvous_of(["a"], "", None) == {"addr": "127.0.0.1", "error": ""}
    assert vl.rendezvous_of(["a", "b"], "10.9.9.9", None) == {"addr": "10.9.9.9", "error": ""}
    assert vl.rendezvous_of(["a", "b"], "", ["10.0.0.1", "ansible_host"]) == {
        "addr": "10.0.0.1", "error": ""}
    assert vl.rendezvous_of(["a", "b"], "", None) == {
        "addr": "", "error": "no rendezvous address for a: its preflight did not run; set "
        "nccl_validate_master_addr"}
    assert vl.rendezvous_of(["a", "b"], "", [None, "no way"])["error"].startswith(
        "no rendezvous address for a: no way")


# --- the image preflight (nccl_validate_preflight) ----------------------------------------------

class FakeRuns:
    """The preflight runs a host would answer, in order: (rc, stdout, stderr)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.argvs = []

    def __call__(self, argv, env):
        self.argvs.append(argv)
        assert env["RDMAPROV_VALIDATE_RUN"] == "fabric"
        return self.answers.pop(0)


def doc(libibverbs="libibverbs.so.1", libuv=True, verbs_devices=1, hcas=("mlx5_0",)):
    return json.dumps({"backend": "nccl",
                       "torch": {"error": None, "cuda_devices": 8, "libuv": libuv},
                       "preflight": {"libibverbs": libibverbs, "hcas": list(hcas),
                                     "verbs_devices": verbs_devices}})


def planned(**over):
    return {**vl.plan(role_settings(), HOST)["settings"], **over}


def test_image_preflight_with_verbs_runs_once():
    runs = FakeRuns((0, doc(libuv=False) + "\n", ""))
    out = vl.image_preflight(planned(), runs)
    assert len(runs.argvs) == 1 and runs.argvs[0][:6] == ["timeout", "-k", "10", "120",
                                                          "podman", "run"]
    assert out["failure"] == "" and out["exit_code"] == 0 and out["document"] == doc(libuv=False)
    assert out["settings"]["torch_libuv"] is False and out["settings"]["rdma_mounts"] == []
    assert out["host_rdma"] == {"mounts": [], "why": "the image loads libibverbs.so.1"}


def test_image_without_verbs_runs_again_with_the_hosts_rdma_core():
    runs = FakeRuns((0, doc(libibverbs=None, verbs_devices=None), ""), (0, doc(), ""))
    out = vl.image_preflight(planned(), runs)
    mounts = vl.host_rdma_mounts(RDMA)
    assert len(runs.argvs) == 2 and all(m in runs.argvs[1] for m in mounts)
    assert not any(m in runs.argvs[0] for m in mounts)
    assert out["failure"] == "" and out["settings"]["rdma_mounts"] == mounts
    assert out["host_rdma"]["why"] == "the image has no libibverbs.so.1"
    # Mounted and still no verbs: the second run's verdict.
    runs = FakeRuns((0, doc(libibverbs=None, verbs_devices=None), ""),
                    (0, doc(libibverbs=None, verbs_devices=None), ""))
    assert vl.image_preflight(planned(), runs)["failure"].startswith(
        "1 HCA(s) (mlx5_0) but libibverbs.so.1 does not load")
    # The host runtime mounts nothing.
    runs = FakeRuns((0, doc(libibverbs=None, verbs_devices=None, hcas=()), ""))
    assert vl.image_preflight(planned(runtime="host"), runs)["host_rdma"]["mounts"] == []
    # always, on a host without rdma-core: one line, no second run.
    runs = FakeRuns((0, doc(), ""))
    out = vl.image_preflight(planned(host_rdma="always", rdma={"libs": {}}), runs)
    assert out["failure"] == ("nccl_validate_host_rdma is always, but this host has no "
                              "libibverbs.so.1 to mount") and len(runs.argvs) == 1


def test_image_preflight_failures_are_one_line():
    out = vl.image_preflight(planned(), FakeRuns((125, "", "Error: image not known\n\n")))
    assert out["failure"] == "image preflight failed (rc 125): Error: image not known"
    assert out["settings"]["torch_libuv"] is None and out["document"] == ""
    assert vl.image_preflight(planned(), FakeRuns((124, "", "")))["failure"] == (
        "image preflight failed (rc 124): no message")
    assert vl.image_preflight(planned(), FakeRuns((0, "Segmentation fault", "")))["failure"] == (
        "image preflight printed no JSON document")
    torchless = json.dumps({"backend": "gloo", "torch": {"error": "ModuleNotFoundError: x"},
                            "preflight": {}})
    out = vl.image_preflight(planned(runtime="host"), FakeRuns((0, torchless, "")))
    assert out["failure"] == "torch is not importable: ModuleNotFoundError: x"


# --- how a part ended (nccl_validate_probe, option result) --------------------------------------

STEPS = ("100.0 launch start\n105.2 rank0 rendezvous at env://\n225.9 rank0 exit 1\n"
         "226.4 launch exit 1\n")


def test_part_that_exited_0_has_no_reason():
    assert vl.part_failure("fabric", "0\n", "anything", STEPS, 600) == ""


def test_part_failure_prefers_the_watchdog_or_the_stop():
    log = ("NCCL INFO chatter\n"
           '{"schema": "rdmaprov.validate.worker/1", "ok": false, "error": "gloo: timed out"}\n'
           '{"ok": false, "error": "stopped: c could not run (its worker exited 2)"}\n'
           "[rank0]: Traceback (most recent call last):\n")
    assert vl.part_failure("fabric", "143", log, STEPS, 600) == (
        "fabric: stopped: c could not run (its worker exited 2) (rc 143) "
        "[rank0: last step 'rendezvous at env://' at +5 s, exit 1 at +126 s; launch exit 1 "
        "at +126 s]")
    log = '{"error": "gloo: timed out"}\n{not json "error"\n'
    assert vl.part_failure("fabric", "1", log, "", 600) == (
        "fabric: worker failed (rc 1): gloo: timed out")


def test_part_failure_last_line_and_timeouts():
    log = ("RuntimeError: No route to host\n"
           "node3:123:456 [0] NCCL INFO chatter\n[rank1]: more\nW1206 12:00:00 torch warns\n")
    assert vl.part_failure("fabric", "1", log, "", 600) == (
        "fabric: worker failed (rc 1): RuntimeError: No route to host")
    assert vl.part_failure("fabric", "124", log, "", 600) == (
        "fabric: worker hung: killed at the run's timeout of 600s (a peer never joined, or "
        "NCCL/gloo hung)")
    assert vl.part_failure("fabric", "137", '{"error": "watchdog: no progress"}', "", 600) == (
        "fabric: worker hung: killed at the run's timeout of 600s (a peer never joined, or "
        "NCCL/gloo hung): watchdog: no progress")
    assert vl.part_failure("socket", "", "", "", 600) == (
        "socket: no exit status: the run did not finish on this host (connection lost?)")
    # The judge words a part the same way, led by the host's first NCCL error that its parse
    # of the log finds (the role on a host has no parser) and without the run's timeout.
    assert vl.part_outcome("124", log, "", own="NCCL WARN x") == (
        "NCCL WARN x; worker hung: killed at the run's timeout (a peer never joined, or "
        "NCCL/gloo hung)")


# --- the modules' own parts: the rendezvous route, a run's files, the wait ----------------------

def _module(name):
    import importlib.util
    path = ROOT / f"plugins/modules/{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_probe_rendezvous_names_an_address_the_rendezvous_host_does_not_hold(monkeypatch):
    probe = _module("nccl_validate_probe")
    monkeypatch.setattr(probe, "route", lambda addr: {"address": addr, "source": "10.0.0.11",
                                                      "error": None})
    spec = {"members": ["node1", "node2"], "master_addr": "10.0.0.200"}
    rdzv, routes = probe.rendezvous({**spec, "host": "node1"}, None)
    assert rdzv == {"addr": "10.0.0.200", "error": (
        "rendezvous address 10.0.0.200: not an address of node1, the rendezvous host, which "
        "listens on it (from here it is another host, reached from 10.0.0.11): set "
        "nccl_validate_master_addr to an address node1 holds, or leave it unset")}
    assert list(routes) == ["10.0.0.200"]
    # Its peers reach it from their own address: nothing to say there.
    assert probe.rendezvous({**spec, "host": "node2"}, None)[0] == {"addr": "10.0.0.200",
                                                                   "error": ""}
    # One host: the loopback, no route probed; no address known: the plan's line.
    assert probe.rendezvous({"members": ["node1"], "master_addr": "", "host": "node1"},
                            None) == ({"addr": "127.0.0.1", "error": ""}, {})
    assert probe.rendezvous({"members": ["node1", "node2"], "master_addr": "", "host": "node2"},
                            None)[0]["error"].startswith("no rendezvous address")


def test_probe_rendezvous_route_error(monkeypatch):
    probe = _module("nccl_validate_probe")
    monkeypatch.setattr(probe, "route", lambda addr: {
        "address": addr, "source": None, "error": f"no route to {addr}: Network is unreachable"})
    rdzv, _routes = probe.rendezvous({"members": ["a", "b"], "master_addr": "", "host": "b"},
                                     ["10.0.0.1", "ansible_host"])
    assert rdzv["error"] == ("rendezvous address 10.0.0.1: no route to 10.0.0.1: Network is "
                             "unreachable")


def test_probe_reads_a_parts_files(tmp_path):
    probe = _module("nccl_validate_probe")
    (tmp_path / "rc").write_text("1\n")
    (tmp_path / "worker.log").write_text('{"error": "watchdog: no progress in barrier"}\n')
    (tmp_path / "steps.log").write_text("10 launch start\n12 rank0 barrier\n")
    part = probe.part({"dir": str(tmp_path), "label": "fabric", "timeout": 600})
    assert part == {"rc": "1", "reason": (
        "fabric: watchdog: no progress in barrier (rc 1) [rank0: last step "
        "'barrier' at +2 s; the launch never exited (its host lost or the wait given up)]")}
    assert probe.part({"dir": str(tmp_path / "none"), "label": "fabric", "timeout": 600}) == {
        "rc": "", "reason": "fabric: no exit status: the run did not finish on this host "
        "(connection lost?)"}


def _wait_action(monkeypatch, jobs, args):
    """The nccl_validate_wait action with the host's async_status answering ``jobs`` in turn."""
    import importlib.util
    from unittest import mock

    from ansible.plugins.action import ActionBase

    path = ROOT / "plugins/action/nccl_validate_wait.py"
    spec = importlib.util.spec_from_file_location("nccl_validate_wait_action", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(module.time, "sleep", lambda s: None)
    task = mock.MagicMock()
    task.args = args
    task.async_val = 0
    action = module.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None, None, None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        return dict(jobs.pop(0))

    monkeypatch.setattr(action, "_execute_module", execute)
    monkeypatch.setattr(action, "_remote_expand_user", lambda p: "/root/.ansible_async")
    monkeypatch.setattr(action, "get_shell_option", lambda name, default=None: default)
    return action, calls


def _launch_args(exits, members, wait=60, poll=2, run_dir="/var/tmp/rdmaprov-validate/fabric",
                 rm_killed=()):
    return {"exits": exits, "members": members, "wait": wait, "poll": poll, "dir": run_dir,
            "rm_killed": list(rm_killed)}


def test_wait_records_the_exit_and_stops_a_peer(monkeypatch, tmp_path):
    exits = str(tmp_path / ".exits")
    members = ["a", "b"]
    args = {"jid": "j1", "launch": _launch_args(exits, members)}
    running = {"started": 1, "finished": 0}
    action, calls = _wait_action(monkeypatch, [running, running, {"finished": 1,
                                                                  "stdout": "2\n"}], args)
    out = action.run(task_vars={"inventory_hostname": "b"})
    # exit_code, not rc: Ansible fails a task whose result has an rc other than 0.
    assert out == {"finished": True, "exit_code": 2, "stop_reason": "", "changed": False}
    assert calls[0] == ("ansible.legacy.async_status", {"jid": "j1",
                                                        "_async_dir": "/root/.ansible_async"})
    assert len(calls) == 3 and (tmp_path / ".exits" / "b").read_text() == "2\n"
    # a's wait ends at its next poll, saying who and why; it stops a's part (the reason in
    # the worker's JSON form into worker.log, then SIGTERM) and waits for it to end.
    action, calls = _wait_action(monkeypatch, [running, {}, running, {"finished": 1}],
                                 {**args, "jid": "j2"})
    out = action.run(task_vars={"inventory_hostname": "a"})
    assert out["finished"] is False and "failed" not in out
    assert out["stop_reason"] == "stopped: b could not run (its worker exited 2)"
    assert [c[0] for c in calls] == ["ansible.legacy.async_status", "ansible.legacy.command",
                                     "ansible.legacy.async_status",
                                     "ansible.legacy.async_status"]
    assert calls[1][1] == {"argv": vl.stop_argv("/var/tmp/rdmaprov-validate/fabric", "a",
                                                out["stop_reason"])}


def test_wait_fails_when_a_stopped_part_does_not_end(monkeypatch, tmp_path):
    (tmp_path / "b").write_text("3\n")
    args = {"jid": "j", "launch": _launch_args(str(tmp_path), ["a", "b"])}
    running = {"finished": 0}
    action, calls = _wait_action(monkeypatch, [running, {}] + [running] * 40, args)
    out = action.run(task_vars={"inventory_hostname": "a"})
    assert out["failed"] is True and len(calls) == 2 + 31
    assert out["msg"] == ("stopped: b could not run (its worker exited 3); this host's part did "
                          "not end within 31 s of its stop")
    # Failed so: its container is left to the next run (leftovers), as the role's tasks did.
    action, calls = _wait_action(monkeypatch, [running, {}] + [running] * 31, {
        "jid": "j", "launch": _launch_args(str(tmp_path), ["a", "b"], rm_killed=["podman"])})
    assert action.run(task_vars={"inventory_hostname": "a"})["failed"] is True
    assert len(calls) == 2 + 31


def test_wait_gives_up_after_its_timeout(monkeypatch, tmp_path):
    args = {"jid": "j", "launch": _launch_args(str(tmp_path), ["a"], wait=5)}
    action, calls = _wait_action(monkeypatch, [{"finished": 0}] * 10, args)
    out = action.run(task_vars={"inventory_hostname": "a"})
    assert out["failed"] is True and out["finished"] is False
    assert out["msg"] == "the job did not finish in 5 s" and len(calls) == 4


def test_module_results_carry_no_top_level_rc():
    """Ansible fails a task whose result has an rc other than 0: a failed preflight or part must
    reach the role's assert as its one line, not as a failed module call."""
    out = vl.image_preflight(planned(), FakeRuns((125, "", "Error: image not known")))
    assert "rc" not in out and out["exit_code"] == 125


# --- what the role keeps, the image, the run around the launch (moved out of the role's YAML) --

def test_nice_json_is_ansibles_to_nice_json():
    from ansible.plugins.filter.core import to_nice_json

    value = {"b": [1, "é"], "a": None, "c": {"z": 1.5, "y": True}}
    assert vl.nice_json(value) == to_nice_json(value) + "\n"
    assert vl.kept("/r/fabric/a", "x.json", value) == {
        "dir": "/r/fabric/a", "dest": "/r/fabric/a/x.json", "content": to_nice_json(value) + "\n"}
    assert vl.kept("/r", "doc.json", '{"a": 1}')["content"] == '{"a": 1}\n'  # text as it is


def test_plan_keeps_the_intended_settings_with_a_cdi_device_and_not_in_check_mode():
    host = {**HOST, "nccl_conf": {"path": "/etc/nccl.conf", "settings": {"NCCL_IB_HCA": "mlx5_0"}}}
    p = vl.plan(role_settings(results_dir="/srv/res"), host)
    assert p["settings"]["results"] == "/srv/res/fabric/b"
    assert p["keep"] == [vl.kept("/srv/res/fabric/b", "nccl_intended.json",
                                 {"NCCL_IB_HCA": "mlx5_0"})]
    assert vl.plan(role_settings(), host, check_mode=True)["keep"] == []
    assert vl.plan(role_settings(cdi_device=""), host)["keep"] == []
    # The host runtime reads the host's own file: the same comparison.
    assert vl.plan(role_settings(runtime="host", results_dir="/srv/res"), host)["keep"] == \
        p["keep"]
    # An engine that reads no CDI spec gets the devices one by one: nothing to compare.
    assert vl.plan(role_settings(), {**host, "cdi": {"engine_cdi": False}})["keep"] == []


def test_job_path_differences_are_validates_nccl_values_a_jobs_conf_lacks():
    conf = {"NCCL_SOCKET_IFNAME": "=eth1", "NCCL_IB_HCA": "=mlx5_0:1"}
    # The same value is the job's path; gloo's and the launch's own log settings are not NCCL's.
    assert vl.job_path_differences({"NCCL_SOCKET_IFNAME": "=eth1", "GLOO_SOCKET_IFNAME": "eth1",
                                    "NCCL_DEBUG": "INFO"}, conf) == []
    # A prefix is not the exact name, and a setting nccl.conf lacks is one the job lacks.
    assert vl.job_path_differences({"NCCL_SOCKET_IFNAME": "eth1", "NCCL_IB_DISABLE": 1}, conf) \
        == [("NCCL_IB_DISABLE", "1", None), ("NCCL_SOCKET_IFNAME", "eth1", "=eth1")]
    assert vl.job_path_differences({}, conf) == [] and vl.job_path_differences(None, None) == []


def test_plan_refuses_validate_env_that_is_not_the_hosts_nccl_conf():
    host = {**HOST, "nccl_conf": {"path": "/etc/nccl.conf",
                                  "settings": {"NCCL_SOCKET_IFNAME": "=eth0"}}}
    p = vl.plan(role_settings(env={"NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1"}),
                host)
    assert p["refuse"] == [
        "not the job's path: nccl_validate_env sets NCCL_SOCKET_IFNAME=eth1, a job's container "
        "gets NCCL_SOCKET_IFNAME==eth0 from /etc/nccl.conf: declare the setting for nccl_env "
        "(nccl_env_socket_ifname, nccl_env_extra) and leave it out of nccl_validate_env, or set "
        "nccl_validate_job_path: false to run off the job's path (never a PASS)"]
    missing = {**HOST, "nccl_conf": {"path": "/etc/nccl.conf", "settings": None}}
    assert "a job's container gets no NCCL_SOCKET_IFNAME from /etc/nccl.conf" in vl.plan(
        role_settings(env={"NCCL_SOCKET_IFNAME": "eth1"}), missing)["refuse"][0]
    # The same value, or the user's insistence (the judge then reports it off the job's path).
    same = role_settings(env={"NCCL_SOCKET_IFNAME": "=eth0"})
    assert vl.plan(same, host)["refuse"] == []
    insist = role_settings(env={"NCCL_SOCKET_IFNAME": "eth1"}, job_path=False)
    assert vl.plan(insist, host)["refuse"] == []
    # The one run's override (--compare-socket's NCCL_IB_DISABLE=1) is not the inventory's.
    assert vl.plan(role_settings(env_override={"NCCL_IB_DISABLE": "1"}), host)["refuse"] == []


def test_plan_rendezvous_step_and_port_problem():
    p = vl.plan(role_settings(master_addr="10.9.9.9", launcher="direct"), HOST)
    assert p["rendezvous"] == {"members": ["a", "b", "c"], "master_addr": "10.9.9.9",
                               "host": "b", "refuse": p["refuse"]} and p["refuse"]
    assert p["port_problem"] == ""
    held = {**HOST, "rendezvous_port": {"port": 29500, "holders": [], "problem": "in use"}}
    assert vl.plan(role_settings(), held)["port_problem"] == "in use"
    s = p["settings"]
    assert (s["pull"], s["pull_timeout"], s["timeout"], s["poll_interval"]) == (
        "missing", 1800, 600, 2)


def test_refusal_rendezvous_first_then_the_plans_in_order():
    assert vl.refusal("", []) == ""
    assert vl.refusal("", ["x", "y"]) == "x"
    assert vl.refusal("no rendezvous", ["x"]) == "no rendezvous"


class ImageRuns:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.argvs = []

    def __call__(self, argv):
        self.argvs.append(argv)
        return self.answers.pop(0)


def test_image_step_there_pulled_or_one_line():
    s = planned(image="reg/img:1", pull_timeout=30)
    runs = ImageRuns((0, "[]", ""))
    assert vl.image_step(s, runs) == {"changed": False, "failure": ""}
    assert runs.argvs == [["podman", "image", "inspect", "reg/img:1"]]
    runs = ImageRuns((1, "", "no such image"), (0, "", ""))
    assert vl.image_step(s, runs) == {"changed": True, "failure": ""}
    assert runs.argvs[1] == ["timeout", "30", "podman", "pull", "reg/img:1"]
    assert vl.image_step({**s, "pull": "never"}, ImageRuns((1, "", ""))) == {
        "changed": False,
        "failure": "image reg/img:1: not on this host and nccl_validate_pull is never"}
    assert vl.image_step(s, ImageRuns((1, "", ""), (124, "", "")))["failure"] == (
        "image reg/img:1: not on this host and pull timed out after 30s")
    out = vl.image_step(s, ImageRuns((1, "", ""), (125, "", "Trying...\nError: denied\n\n")))
    assert out == {"changed": True,
                   "failure": "image reg/img:1: not on this host and pull failed: Error: denied"}
    assert vl.image_step(s, ImageRuns((1, "", ""), (1, "", "")))["failure"].endswith(
        "pull failed: no message")
    # The host runtime needs no image: nothing runs.
    runs = ImageRuns()
    assert vl.image_step({**s, "runtime": "host"}, runs) == {"changed": False, "failure": ""}
    assert runs.argvs == []


def _run_of(probe=None, **over):
    s = vl.plan(role_settings(results_dir="/srv/res", **over), {**HOST, **(probe or {})})[
        "settings"]
    launch = vl.launch(s, "fabric", s["members"], s["host"], "10.0.0.1", 29500)
    return s, launch, vl.run_plan(s, launch, "10.0.0.1")


def test_run_plan_around_the_launch():
    _s, launch, run = _run_of()
    assert run["start"][:2] == ["/bin/sh", "-c"] and run["start"][3:5] == [launch["dir"], "600"]
    assert run["start"][5:] == launch["argv"]
    assert (run["wait"], run["poll"], run["timeout"], run["label"]) == (660, 2, 600, "fabric")
    assert run["members"] == ["a", "b", "c"] and run["exits"] == "/srv/res/fabric/.exits"
    assert run["local"] == "/srv/res/fabric/b" and run["rails_local"] == "/srv/res/rails/b"
    assert run["host_paths"] == [{"path": launch["dir"], "state": "absent"},
                                 {"path": launch["dir"], "state": "directory"}]
    assert run["controller_paths"] == [
        {"path": "/srv/res/fabric/b", "state": "directory"},
        {"path": "/srv/res/fabric/.exits/b", "state": "absent"},
        {"path": "/srv/res/rails/b", "state": "absent"}]
    assert run["rm_killed"] == ["podman", "rm", "--force", "rdmaprov-validate-fabric"]
    assert run["keep"] == []  # b does not hold the rendezvous: a records the run
    # No rail round: nothing of one cleared; docker removes its own leftover (--rm).
    _s, _l, run = _run_of({"engine": "docker"}, rails="never")
    assert run["rails_local"] == "" and len(run["controller_paths"]) == 2
    assert run["rm_killed"][:2] == ["docker", "rm"]
    _s, _l, run = _run_of(runtime="host")
    assert run["rm_killed"] == []


def test_run_plan_records_the_run_on_the_rendezvous_host():
    s, _launch, run = _run_of(host="a", nproc_per_node="2", address="10.0.0.1")
    assert run["keep"] == [vl.kept("/srv/res/fabric", "run.json", {
        "label": "fabric", "hosts": ["a", "b", "c"], "master": "a", "master_addr": "10.0.0.1",
        "master_port": 29500, "runtime": "container", "image": s["image"],
        "launcher": "torchrun", "backend": "nccl", "nproc_per_node": 2})]
    _s, _launch, run = _run_of(host="a", runtime="host")
    assert json.loads(run["keep"][0]["content"])["image"] is None


HOSTILE = "x'$(touch {m})\"`touch {m}`;touch {m}\n"


def test_start_and_stop_scripts_take_values_as_arguments(tmp_path):
    """The launch's shell and the stop run hostile directory, argv and reason text as data."""
    import subprocess

    marker = tmp_path / "PWNED"
    bad = HOSTILE.format(m=marker)
    run_dir = tmp_path / "run x'$(touch PWNED)\"`touch PWNED`;touch PWNED"
    run_dir.mkdir()
    start = ["/bin/sh", "-c", vl.START_SCRIPT, str(run_dir), "20", "sh", "-c",
             'echo "$1" >&2; exit 3', "sh", bad]
    out = subprocess.run(start, capture_output=True, text=True, timeout=30, check=False,
                         cwd=tmp_path)
    assert out.stdout.strip() == "3" and (run_dir / "rc").read_text() == "3\n"
    assert (run_dir / "argv.txt").read_text().splitlines()[:3] == ["sh", "-c",
                                                                  'echo "$1" >&2; exit 3']
    assert bad.strip() in (run_dir / "worker.log").read_text()
    steps = (run_dir / "steps.log").read_text().splitlines()
    assert steps[0].endswith(" launch start") and steps[1].endswith(" launch exit 3")
    assert (run_dir / "job.pid").read_text().strip().isdigit()
    # The stop: the reason, as the worker's JSON line, then SIGTERM to the job.
    job = subprocess.Popen(["sleep", "30"])
    (run_dir / "job.pid").write_text(f"{job.pid}\n")
    subprocess.run(vl.stop_argv(str(run_dir), bad, f"stopped: {bad}"), timeout=30, check=True,
                   cwd=tmp_path)
    assert job.wait(timeout=10) == -15
    last = json.loads((run_dir / "worker.log").read_text().splitlines()[-1])
    assert last == {"schema": "rdmaprov.validate.worker/1", "ok": False, "hostname": bad,
                    "error": f"stopped: {bad}"}
    assert not marker.exists() and not (tmp_path / "PWNED").exists()
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "argv.txt", "job.pid", "rc", "result.json", "steps.log", "worker.log"]


def test_fetched_files_and_rail_outputs():
    out = vl.fetched("/v/fabric", "/r/fabric/a", "", ["x.log"])
    assert [f["src"] for f in out] == [f"/v/fabric/{n}" for n in (*vl.FETCHED, vl.STEPS_FILE)]
    assert out[0]["dest"] == "/r/fabric/a/rc"
    out = vl.fetched("/v/fabric", "/r/fabric/a", "/r/rails/a",
                     ["mlx5_0.port1.round0.log", "skipped", ".hidden", "bad name", "x" * 129])
    assert out[-2:] == [
        {"src": "/v/fabric/rails/mlx5_0.port1.round0.log",
         "dest": "/r/rails/a/mlx5_0.port1.round0.log"},
        {"src": "/v/fabric/rails/skipped", "dest": "/r/rails/a/skipped"}]


def test_probe_part_lists_what_to_fetch(tmp_path):
    probe = _module("nccl_validate_probe")
    (tmp_path / "rc").write_text("0\n")
    (tmp_path / "rails").mkdir()
    (tmp_path / "rails" / "skipped").write_text("")
    (tmp_path / "rails" / "sub").mkdir()
    result = {"dir": str(tmp_path), "label": "fabric", "timeout": 600, "local": "/r/fabric/a",
              "rails_local": "/r/rails/a"}
    part = probe.part(result)
    assert part["reason"] == "" and part["fetch"] == vl.fetched(
        str(tmp_path), "/r/fabric/a", "/r/rails/a", ["skipped"])
    assert probe.part({**result, "rails_local": ""})["fetch"] == vl.fetched(
        str(tmp_path), "/r/fabric/a", "", [])


def test_wait_removes_the_container_of_the_run_last(monkeypatch, tmp_path):
    (tmp_path / "b").write_text("2\n")
    rm = ["podman", "rm", "--force", "rdmaprov-validate-fabric"]
    args = {"jid": "j", "launch": _launch_args(str(tmp_path), ["a", "b"], rm_killed=rm)}
    running = {"finished": 0}
    action, calls = _wait_action(monkeypatch, [running, {}, {"finished": 1}, {"rc": 1}], args)
    out = action.run(task_vars={"inventory_hostname": "a"})
    assert "failed" not in out and out["stop_reason"].startswith("stopped: b could not run")
    assert calls[-1] == ("ansible.legacy.command", {"argv": rm})  # its failure says nothing
    # A part that finished: its container is removed all the same (a no-op after --rm).
    action, calls = _wait_action(monkeypatch, [{"finished": 1, "stdout": "0\n"}, {"rc": 0}],
                                 {**args, "launch": _launch_args(str(tmp_path), ["a"],
                                                                 rm_killed=rm)})
    assert action.run(task_vars={"inventory_hostname": "a"})["finished"] is True
    assert [c[0] for c in calls] == ["ansible.legacy.async_status", "ansible.legacy.command"]


def test_leftovers_of_an_interrupted_run_on_podman():
    s = planned()
    assert vl.leftovers(s) == [
        ["podman", "rm", "--force", "--ignore", "rdmaprov-validate-fabric-preflight"],
        ["podman", "rm", "--force", "--ignore", "rdmaprov-validate-fabric"]]
    assert vl.leftovers({**s, "engine": "docker"}) == []  # docker's --rm removes its own
    assert vl.leftovers({**s, "runtime": "host"}) == []


def test_keep_results_on_the_controller(tmp_path):
    res = tmp_path / "res" / "fabric"
    old = tmp_path / "res" / "rails" / "a"
    (old / "sub").mkdir(parents=True)
    (old / "sub" / "x.log").write_text("old")
    (res / ".exits").mkdir(parents=True)
    (res / ".exits" / "a").write_text("2\n")
    paths = [{"path": str(res / "a"), "state": "directory"},
             {"path": str(res / ".exits" / "a"), "state": "absent"},
             {"path": str(old), "state": "absent"}]
    # The paths only reset an earlier run's: not a change.
    assert vl.keep_results(paths) is False
    assert (res / "a").is_dir() and (res / "a").stat().st_mode & 0o7777 == 0o755
    assert not (res / ".exits" / "a").exists() and not old.exists()
    assert vl.keep_results(paths) is False  # again: nothing there to remove
    files = [vl.kept(str(res / "a" / "new"), "preflight.json", '{"ok": true}'),
             vl.kept(str(res), "run.json", {"label": "fabric"})]
    # Check mode: would change, touches nothing.
    assert vl.keep_results(files=files, dry=True) is True and not (res / "a" / "new").exists()
    assert vl.keep_results(files=files) is True
    assert (res / "a" / "new" / "preflight.json").read_text() == '{"ok": true}\n'
    assert (res / "run.json").read_text() == vl.nice_json({"label": "fabric"})
    assert {(res / "a" / "new").stat().st_mode & 0o7777,
            (res / "run.json").stat().st_mode & 0o7777} == {0o755, 0o644}
    assert vl.keep_results(files=files) is False  # the same content: no change
    (res / "run.json").chmod(0o600)
    assert vl.keep_results(files=files, dry=True) is True
    assert vl.keep_results(files=files) is True
    assert (res / "run.json").stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in res.rglob("*tmp*")) == []
    with pytest.raises(ValueError, match="directory or absent, not 'file'"):
        vl.keep_results([{"path": str(res), "state": "file"}])


def test_results_action_keeps_what_it_is_given(monkeypatch, tmp_path):
    import importlib.util
    from unittest import mock

    from ansible.plugins.action import ActionBase

    path = ROOT / "plugins/action/nccl_validate_results.py"
    spec = importlib.util.spec_from_file_location("nccl_validate_results_action", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    files = [vl.kept(str(tmp_path / "r"), "run.json", {"a": 1})]

    def action(args, check_mode=False):
        task = mock.MagicMock()
        task.args = args
        task.async_val = 0
        task.check_mode = check_mode
        return module.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None, None, None)

    assert action({"files": files}, check_mode=True).run(task_vars={}) == {
        "changed": True, "kept": [files[0]["dest"]]}
    assert not (tmp_path / "r").exists()
    assert action({"files": files}).run(task_vars={})["changed"] is True
    assert action({"files": files}).run(task_vars={})["changed"] is False
    (tmp_path / "f").write_text("")
    out = action({"files": [vl.kept(str(tmp_path / "f"), "x", "y")]}).run(task_vars={})
    assert out["failed"] is True and out["msg"].startswith("results on the controller: ")


def test_worker_copies_are_the_worker_its_parts_beside_it_and_the_port_reader():
    got = vl.worker_copies("/ctl/v/worker.py", "/coll/rdma_ports.py", "/var/tmp/rv")
    assert [c["name"] for c in got] == ["worker.py", *vl.WORKER_PARTS, "rounds.py",
                                        "rdma_ports.py"]
    assert {c["name"]: c["src"] for c in got} == {
        "worker.py": "/ctl/v/worker.py", "rdma_ports.py": "/coll/rdma_ports.py",
        **{n: f"/ctl/v/{n}" for n in (*vl.WORKER_PARTS, "rounds.py")}}
    assert all(c["dest"] == f"/var/tmp/rv/bin/{c['name']}" for c in got)


def _probe_action(monkeypatch, variables, plan):
    import importlib
    from unittest import mock

    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.action import ActionBase
    from ansible.template import Templar

    mod = importlib.import_module("ansible_collections.rdmaprov.cluster.plugins.action."
                                  "nccl_validate_probe")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    task = mock.MagicMock()
    task.args = {"settings": {"label": "fabric"}}
    task.resolved_action = "rdmaprov.cluster.nccl_validate_probe"
    action = mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None,
                              Templar(loader=DataLoader(), variables=variables), None)
    monkeypatch.setattr(action, "_execute_module",
                        lambda module_name, module_args, task_vars: {"plan": dict(plan)})
    return mod, action


def test_the_probe_action_finds_the_worker_on_the_controller(monkeypatch):
    import rdmaprov.validate.worker as w

    base = {"inventory_hostname": "a", "nccl_validate_remote_dir": "/r"}
    # nccl_validate_worker_src wins; empty: the worker of the rdmaprov this Python imports
    _, action = _probe_action(monkeypatch, {**base, "nccl_validate_worker_src": "/s/worker.py"},
                              {"members": ["a"]})
    got = action.run(task_vars={**base, "nccl_validate_worker_src": "/s/worker.py"})["plan"]
    assert got["members"] == ["a"] and got["worker"][0] == {
        "name": "worker.py", "src": "/s/worker.py", "dest": "/r/bin/worker.py"}
    assert got["worker"][1]["src"] == f"/s/{vl.WORKER_PARTS[0]}"
    ports = got["worker"][-1]["src"]
    assert Path(ports).read_text() == (ROOT / "plugins/module_utils/rdma_ports.py").read_text()
    variables = {**base, "nccl_validate_worker_src": ""}
    mod, action = _probe_action(monkeypatch, variables, {})
    assert action.run(task_vars=variables)["plan"]["worker"][0]["src"] == w.__file__
    # none to import: one line
    monkeypatch.setattr(mod.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(mod.AnsibleActionFail, match=r"^nccl_validate_worker_src is empty and "
                       r".* cannot import rdmaprov.validate.worker: set it to the worker.py of "
                       r"an rdmaprov$"):
        action.run(task_vars=variables)
    # the rendezvous and result calls (no settings) get no worker
    _, action = _probe_action(monkeypatch, variables, {"own": []})
    action._task.args = {"rendezvous": {}}
    assert "worker" not in action.run(task_vars=variables)["plan"]
