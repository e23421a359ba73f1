"""The proof runs the job's path (issue 37 item 2): validate's worker gets the NCCL settings of
the host's /etc/nccl.conf, as a job's container does through the RDMA CDI device, and no other.

- `rdmaprov validate INV` whose nccl_validate_env sets an NCCL_* value that nccl.conf will not
  hold is refused before any host is contacted: exit 1, one line naming both values and where
  each comes from (the host is a listener of this test: a connection would be waiting).
- `--judge` of a results directory: the settings each worker applied (its environment and the
  files NCCL read, in NCCL's order) are in the report; a run whose launch set NCCL values that
  a job's nccl.conf does not hold is "not the job's path" and never passes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_validate_judge import IB_LOG, SYSFS, json_report, make_run, worker_doc

from rdmaprov import collection
from rdmaprov.lab import inventory as lab_inventory
from rdmaprov.validate import nccl_settings
from rdmaprov.validate import worker_preflight as wp

IC = collection.input_check


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def contacted(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def validate(inventory: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RDMAPROV_", "ANSIBLE_"))}
    return subprocess.run([sys.executable, "-m", "rdmaprov", "validate", str(inventory)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rdmaprov: error: "), proc.stderr
    return lines[0].removeprefix("rdmaprov: error: ")


def inventory(tmp: Path, port: int, group_vars: dict) -> tuple[Path, Path]:
    inv = tmp / "inventory.ini"
    inv.write_text(f"[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port={port}\n")
    (tmp / "group_vars").mkdir()
    gv = tmp / "group_vars" / "gpu.yml"
    gv.write_text(yaml.safe_dump(group_vars))
    return inv, gv


TAIL = (": declare the setting for nccl_env (nccl_env_socket_ifname, nccl_env_extra) and leave "
        "it out of nccl_validate_env, or set nccl_validate_job_path: false to run off the job's "
        "path (never a PASS)")


def test_validate_env_that_differs_from_the_declared_nccl_conf_is_refused(
        tmp_path: Path, listener: socket.socket) -> None:
    inv, gv = inventory(tmp_path, listener.getsockname()[1], {
        "nccl_env_socket_ifname": "eth1",
        "nccl_validate_env": {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth1"}})
    msg = one_line_error(validate(inv))
    assert msg == (f"{gv}: not the job's path: nccl_validate_env sets NCCL_SOCKET_IFNAME=eth0, "
                   "a job's container gets NCCL_SOCKET_IFNAME==eth1 from /etc/nccl.conf "
                   "(nccl_env writes it from nccl_env_socket_ifname)" + TAIL)
    assert not contacted(listener)


def test_the_old_lab_group_vars_are_refused(tmp_path: Path, listener: socket.socket) -> None:
    # What `lab up` wrote before: validate proved eth1 while nccl_env wrote the connection's eth0.
    inv, gv = inventory(tmp_path, listener.getsockname()[1], {
        "nccl_validate_env": {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "eth1"}})
    msg = one_line_error(validate(inv))
    assert msg == (f"{gv}: not the job's path: nccl_validate_env sets NCCL_SOCKET_IFNAME=eth1, "
                   "a job's container gets the interface nccl_env finds on each host, from "
                   "/etc/nccl.conf (nccl_env_socket_ifname is not set)" + TAIL)
    assert not contacted(listener)


def test_the_rule_before_contact() -> None:
    # The same value as nccl_env writes, gloo's own interface, the launch's log: the job's path.
    assert IC.job_path_problem({"nccl_env_socket_ifname": "eth1", "nccl_validate_env": {
        "NCCL_SOCKET_IFNAME": "=eth1", "GLOO_SOCKET_IFNAME": "eth1", "NCCL_DEBUG": "WARN"}}) == ""
    assert IC.job_path_problem({"nccl_env_extra": {"NCCL_IB_TIMEOUT": 22},
                                "nccl_validate_env": {"NCCL_IB_TIMEOUT": "22"}}) == ""
    # A value nccl_env_extra declares otherwise, one only each host knows.
    assert IC.job_path_problem({"nccl_env_extra": {"NCCL_IB_TIMEOUT": 22},
                                "nccl_validate_env": {"NCCL_IB_TIMEOUT": 18}}).startswith(
        "not the job's path: nccl_validate_env sets NCCL_IB_TIMEOUT=18, a job's container gets "
        "NCCL_IB_TIMEOUT=22 from /etc/nccl.conf (nccl_env writes it from "
        "nccl_env_extra.NCCL_IB_TIMEOUT)")
    assert "NCCL_IB_HCA from /etc/nccl.conf only as nccl_env finds it on each host" in \
        IC.job_path_problem({"nccl_validate_env": {"NCCL_IB_HCA": "mlx5_0"}})
    # The user insists: no refusal here (the report then says it is not the job's path); a
    # value only the run knows is the run's to judge.
    assert IC.job_path_problem({"nccl_validate_job_path": False,
                                "nccl_validate_env": {"NCCL_IB_HCA": "mlx5_0"}}) == ""
    assert IC.job_path_problem({"nccl_validate_env": {"NCCL_IB_HCA": "{{ hca }}"}}) == ""
    # A single role's own check cannot see nccl_env's variables: the rule is not applied there.
    only_validate = {k: v for k, v in IC.declared_options(IC.role_specs(
        str(Path(collection.__file__).parent.parent / "roles"), ["nccl_validate"])).items()}
    assert IC.check({"nccl_validate_env": {"NCCL_IB_HCA": "mlx5_0"}}, only_validate) == []


def test_the_labs_own_group_vars_are_the_jobs_path(tmp_path: Path) -> None:
    class State:
        fabric_bridge, fabric_mtu, netstack = "br", 9000, "none"
        fabric_subnet, subnet = "10.198.1.0/24", "10.199.1.0/24"
        suite = "bookworm"

    lab_inventory.write_group_vars(State(), tmp_path)  # type: ignore[arg-type]
    doc = yaml.safe_load((tmp_path / "group_vars/lab.yml").read_text())
    assert doc["nccl_env_socket_ifname"] == "eth1"  # the fabric, declared for nccl.conf
    assert not any(k.startswith("NCCL_") for k in doc["nccl_validate_env"])
    assert IC.job_path_problem(doc) == ""


def test_worker_applied_follows_ncclss_order(tmp_path: Path) -> None:
    user = tmp_path / "user.conf"
    user.write_text("NCCL_IB_HCA==mlx5_1\nNCCL_IB_TIMEOUT=20\n")
    system = tmp_path / "nccl.conf"
    system.write_text("# written by nccl_env\nNCCL_IB_HCA==mlx5_0\nNCCL_SOCKET_IFNAME==eth1\n")
    seen = {"env": {"NCCL_IB_TIMEOUT": "22", "NCCL_DEBUG": "INFO"},
            "files": [[str(user), user.read_text()], [str(system), system.read_text()],
                      ["/nonexistent/.nccl.conf", None]]}
    assert nccl_settings.worker_applied(seen) == {
        "NCCL_DEBUG": {"value": "INFO", "from": "environment"},
        "NCCL_IB_HCA": {"value": "=mlx5_1", "from": str(user)},
        "NCCL_IB_TIMEOUT": {"value": "22", "from": "environment"},
        "NCCL_SOCKET_IFNAME": {"value": "=eth1", "from": str(system)}}
    assert nccl_settings.worker_applied(None) == {}


def test_the_worker_records_what_ncc_reads(tmp_path: Path) -> None:
    conf = tmp_path / "job.conf"
    conf.write_text("NCCL_SOCKET_IFNAME==eth1\n")
    seen = wp.nccl_seen({"NCCL_CONF_FILE": str(conf), "NCCL_DEBUG": "INFO", "PATH": "/bin"})
    assert seen["env"] == {"NCCL_CONF_FILE": str(conf), "NCCL_DEBUG": "INFO"}
    assert seen["files"][0] == [str(conf), "NCCL_SOCKET_IFNAME==eth1\n"]
    assert seen["files"][1][0] == "/etc/nccl.conf"
    assert "nccl" in wp.preflight()


def _run_with(tmp: Path, env: dict[str, str], conf: str, intended: dict[str, str],
              argv_env: list[str]) -> Path:
    hosts = {"n1": (SYSFS / "ib_hdr", IB_LOG), "n2": (SYSFS / "ib_hdr", IB_LOG)}
    doc = worker_doc(list(hosts), 0.9 * 25.0)
    for h in hosts:
        doc["preflight"][h] = {"problems": [], "nccl": {
            "env": env, "files": [["/root/.nccl.conf", None], ["/etc/nccl.conf", conf]]}}
    run = make_run(tmp, "fabric", hosts, doc)
    for h in hosts:
        (run / h / "nccl_intended.json").write_text(json.dumps(intended))
        (run / h / "argv.txt").write_text("\n".join(
            ["podman", "run", *[f"--env={n}" for n in argv_env], "IMAGE", "sh"]) + "\n")
    return tmp


def test_judge_records_the_applied_settings_and_passes_the_jobs_path(tmp_path, capsys) -> None:
    conf = "NCCL_SOCKET_IFNAME==eth1\n"
    results = _run_with(tmp_path, {"NCCL_DEBUG": "INFO", "NCCL_CONF_FILE": "/etc/nccl.conf",
                                   "NCCL_IB_TIMEOUT": "19"},
                        conf, {"NCCL_SOCKET_IFNAME": "=eth1"}, ["NCCL_DEBUG"])
    doc = json_report(results, capsys=capsys)
    [chk] = [c for c in doc["checks"] if c["name"] == "job_path"]
    assert chk["status"] == "pass", chk
    assert chk["reason"] == ("the workers gave NCCL the settings a job's container gets (the "
                             "host's nccl.conf; 2 of 2 hosts compared)")
    n1 = next(h for h in doc["hosts"] if h["host"] == "n1")
    # NCCL_IB_TIMEOUT is the image's own (the launch did not pass it): a job's has it too.
    assert n1["nccl_applied"] == {
        "NCCL_CONF_FILE": {"value": "/etc/nccl.conf", "from": "environment"},
        "NCCL_DEBUG": {"value": "INFO", "from": "environment"},
        "NCCL_IB_TIMEOUT": {"value": "19", "from": "environment"},
        "NCCL_SOCKET_IFNAME": {"value": "=eth1", "from": "/etc/nccl.conf"}}
    assert doc["passed"]


def test_a_launch_that_set_other_nccl_values_is_not_the_jobs_path(tmp_path, capsys) -> None:
    # nccl_validate_job_path: false let nccl_validate_env's eth1 through; nccl.conf says eth0.
    results = _run_with(tmp_path, {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth1"},
                        "NCCL_SOCKET_IFNAME==eth0\n", {"NCCL_SOCKET_IFNAME": "=eth0"},
                        ["NCCL_DEBUG", "NCCL_SOCKET_IFNAME"])
    doc = json_report(results, capsys=capsys)
    [chk] = [c for c in doc["checks"] if c["name"] == "job_path"]
    one = ("NCCL_SOCKET_IFNAME=eth1 (the launch's environment), a job's container: "
           "NCCL_SOCKET_IFNAME==eth0 (the host's nccl.conf)")
    assert chk["status"] == "fail"
    assert chk["reason"] == f"not the job's path: n1: {one} | n2: {one}"
    assert not doc["passed"] and doc["exit_code"] == 2
