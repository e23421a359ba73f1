"""The firewall role on lab nodes, one backend per node, with real listeners.

node1 runs the nftables backend, node2 firewalld and node3 ufw (both Debian packages from the
lab's apt repository). The host's own lab addresses (.1) stand for the rest of the world: the
declared cluster subnets are the /29s of the nodes (.8-.15), so the host is outside them. Every
listener is a real process started with systemd-run in the node (an http.server as a node
exporter, a UDP echo as an mDNS-like service, dhclient on a veth for the DHCP client's 68/udp),
and every firewall change is followed by a fresh SSH login from the host.

Run: RDMAPROV_TEST_LAB=vfw .venv/bin/pytest -q tests/integration/test_firewall_lab.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "molecule/network/converge.yml"

TCP_ECHO = ("import socket,sys\ns=socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else "
            "socket.AF_INET);s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
            "s.bind((sys.argv[1],int(sys.argv[2])));s.listen()\n"
            "while True:\n c,_=s.accept();c.sendall(b'ok');c.close()")
UDP_ECHO = ("import socket,sys\ns=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM)\n"
            "s.bind(('::',int(sys.argv[1])))\n"
            "while True:\n d,a=s.recvfrom(64);s.sendto(b'ok',a)")
# Prints ok, refused, timeout or blocked (an ICMP reject: firewalld and ufw answer so).
PROBE = r"""
import socket,sys
host,port,proto=sys.argv[1],int(sys.argv[2]),sys.argv[3]
try:
    if proto=='tcp':
        s=socket.create_connection((host,port),timeout=3);s.sendall(b'GET / HTTP/1.0\r\n\r\n')
        print(s.recv(2).decode() or 'closed')
    else:
        s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3)
        s.sendto(b'hi',(host,port));print(s.recvfrom(64)[0].decode())
except ConnectionRefusedError: print('refused')
except TimeoutError: print('timeout')
except OSError as e: print('blocked', e.errno)
"""


@pytest.fixture(scope="module")
def env(lab, tmp_path_factory):
    colls = tmp_path_factory.mktemp("collections")
    (colls / "ansible_collections/rdmaprov").mkdir(parents=True)
    (colls / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
    state = lab.lab._load()
    subnets = sorted({re.sub(r"\.\d+$", ".8/29", n[k]) for n in state.nodes
                      for k in ("address", "fabric_address")})
    for node, pkg in (("node1", "isc-dhcp-client"), ("node2", "firewalld"), ("node3", "ufw")):
        lab.exec(node, ["sh", "-c", "apt-get -q update >/dev/null && DEBIAN_FRONTEND="
                        f"noninteractive apt-get -q -y --no-install-recommends install {pkg}"])
    yield {"lab": lab, "colls": colls, "tmp": tmp_path_factory.mktemp("vars"),
           # The role's own rollback timing (45 s): a shorter one was seen to fire on this
           # busy 2-core machine before Ansible's reconnect got through (and roll back, right).
           "base": {"firewall_cluster_subnets": subnets},
           "addr": lab.addresses, "host": state.subnet.rsplit(".", 1)[0] + ".1"}
    # The lab is the session's: the next modules get nodes without this module's listeners (a
    # python3 left on 29500 made a later one-host validation fail with EADDRINUSE) or firewalls.
    for node in ("node1", "node2", "node3"):
        lab.exec(node, ["sh", "-c", "systemctl stop 'fw-*'; systemctl reset-failed 'fw-*'; "
                        "ip link del fwdhcp0 2>/dev/null; true"], check=False)
    lab.exec("node2", ["systemctl", "disable", "--now", "firewalld"], check=False)
    lab.exec("node3", ["sh", "-c", "ufw --force reset >/dev/null; ufw disable"], check=False)


def play(env, node: str, extra: dict | None = None, *args: str) -> subprocess.CompletedProcess:
    varsfile = env["tmp"] / f"vars-{node}.json"
    varsfile.write_text(json.dumps({**env["base"], **(extra or {})}))
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i",
            str(env["lab"].inventory), str(PLAYBOOK), "--tags", "firewall", "--limit", node,
            "-e", f"@{varsfile}", *args]
    run_env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(env["colls"]),
               "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(argv, capture_output=True, text=True, env=run_env, timeout=400,
                          check=False)


def changed(res: subprocess.CompletedProcess) -> int:
    row = next(line for line in res.stdout.splitlines() if " : ok=" in line)
    return int(row.split("changed=")[1].split()[0])


def converges(env, node: str, extra: dict | None = None) -> None:
    """Green, then a re-run and a --check run that change nothing, SSH alive after each."""
    first = play(env, node, extra)
    assert first.returncode == 0, first.stdout[-4000:]
    ssh_works(env, node)
    for args in ((), ("--check",)):
        again = play(env, node, extra, *args)
        assert again.returncode == 0, again.stdout[-3000:]
        assert changed(again) == 0, again.stdout[-3000:]
    ssh_works(env, node)


def ssh_works(env, node: str) -> None:
    """A fresh SSH login from the host (no ControlPersist master to lean on)."""
    res = subprocess.run([*env["lab"].ssh_argv(node), "-o", "ControlMaster=no",
                          "-o", "ConnectTimeout=5", "true"], capture_output=True, text=True,
                         timeout=30, check=False)
    assert res.returncode == 0, f"SSH to {node} after a firewall change: {res.stderr}"


def reach(env, src: str, node: str, port: int, proto: str = "tcp") -> str:
    """What a connection from src ('host' or a node) to node's lab address meets."""
    target = env["addr"][node]
    argv = ["python3", "-c", PROBE, target, str(port), proto]
    if src == "host":
        res = subprocess.run([sys.executable, "-c", PROBE, target, str(port), proto],
                             capture_output=True, text=True, timeout=30, check=False)
    else:
        res = env["lab"].exec(src, argv, check=False)
    assert res.returncode == 0 and res.stdout.strip(), f"probe failed: {res.stderr}"
    return res.stdout.strip()


def serve(env, node: str, unit: str, argv: list[str]) -> None:
    """A listener as a transient unit; returns once its process holds a socket."""
    lab = env["lab"]
    lab.exec(node, ["systemctl", "stop", unit], check=False)
    lab.exec(node, ["systemctl", "reset-failed", unit], check=False)
    lab.exec(node, ["systemd-run", f"--unit={unit}", *argv])
    # Up to 60 s (a busy 2-core machine); a unit that exits (a port taken, say) ends the wait at
    # once, and a failure shows the unit, its log and who listens, so its cause is named.
    waited = lab.exec(node, ["sh", "-c", f"for i in $(seq 600); do pid=$(systemctl show -P MainPID "
                             f"{unit}); ss -H -lntup | grep -q \"pid=$pid,\" && exit 0; "
                             f"systemctl -q is-active {unit} || exit 1; sleep 0.1; done; exit 1"],
                      check=False)
    if waited.returncode != 0:
        seen = lab.exec(node, ["sh", "-c", f"systemctl status --no-pager {unit}; journalctl "
                               f"--no-pager -n 20 -u {unit}; ss -H -lntup"], check=False)
        raise AssertionError(f"{node}: {unit} holds no socket:\n{seen.stdout}{seen.stderr}")


def listeners(env, node: str) -> None:
    """The services a host runs that rdmaprov has no business cutting."""
    serve(env, node, "fw-exporter", ["python3", "-m", "http.server", "9100"])
    serve(env, node, "fw-mdns", ["python3", "-c", UDP_ECHO, "5353"])
    serve(env, node, "fw-rdzv", ["python3", "-c", TCP_ECHO, "0.0.0.0", "29500"])
    env["lab"].exec(node, ["sh", "-c", "ip link show fwdhcp0 >/dev/null 2>&1 || { ip link add "
                           "fwdhcp0 type veth peer name fwdhcp1 && ip link set fwdhcp0 up && "
                           "ip link set fwdhcp1 up; }"])
    serve(env, node, "fw-dhcp", ["dhclient", "-d", "-pf", "/run/fw-dhclient.pid",
                                 "-lf", "/run/fw-dhclient.leases", "fwdhcp0"])
    for unit in ("fw-exporter", "fw-mdns", "fw-rdzv", "fw-dhcp"):
        state = env["lab"].exec(node, ["systemctl", "is-active", unit], check=False).stdout
        assert state.strip() == "active", f"{node}: listener {unit} is {state.strip()}"


def booted(env, node: str) -> None:
    """Wait for the node's boot to finish (its units, firewalls included, have started)."""
    env["lab"].exec(node, ["systemctl", "is-system-running", "--wait"], check=False)


def nft_table(env, node: str) -> str:
    return env["lab"].exec(node, ["nft", "list", "table", "inet", "rdmaprov"], check=False).stdout


# --- nftables (node1) -------------------------------------------------------------------------
def test_nftables_scoped_default_keeps_every_listener(env):
    lab = env["lab"]
    listeners(env, "node1")
    lab.exec("node1", ["nft", "delete", "table", "inet", "rdmaprov"], check=False)
    # Something that is not rdmaprov listens on the rendezvous port: scoped refuses that port to
    # hosts outside the cluster, so the preflight names it, and changes nothing.
    refused = play(env, "node1")
    assert refused.returncode != 0
    assert ("node1: firewall_policy=scoped would cut these listening services: 29500/tcp "
            "(python3); allow each one") in refused.stdout, refused.stdout[-3000:]
    assert nft_table(env, "node1") == ""
    converges(env, "node1", {"firewall_waive": ["29500/tcp"]})
    assert "policy accept" in nft_table(env, "node1")
    # From outside the cluster: the exporter, the UDP service and SSH pass as before; only
    # rdmaprov's own rendezvous port is refused.
    assert reach(env, "host", "node1", 9100) == "HT"  # http.server answers "HTTP/1.0 ..."
    assert reach(env, "host", "node1", 5353, "udp") == "ok"
    assert reach(env, "host", "node1", 29500) == "refused"
    # From a cluster node: the rendezvous port is open.
    assert reach(env, "node2", "node1", 29500) == "ok"
    assert env["lab"].exec("node1", ["systemctl", "is-active", "fw-dhcp"]).stdout.strip() == \
        "active"


def test_nftables_deny_refuses_naming_the_listeners_then_passes_when_allowed(env):
    lab = env["lab"]
    listeners(env, "node1")
    lab.exec("node1", ["sh", "-c", "mkdir -p /etc/slurm && printf 'ClusterName=fw\\n"
                       "SlurmdPort=6818\\nSrunPortRange=61001-61100\\n' > /etc/slurm/slurm.conf"])
    serve(env, "node1", "fw-slurmd", ["python3", "-c", TCP_ECHO, "0.0.0.0", "6818"])
    before = nft_table(env, "node1")
    refused = play(env, "node1", {"firewall_policy": "deny"})
    assert refused.returncode != 0
    line = next(ln for ln in refused.stdout.splitlines()
                if ln.startswith("fatal: [node1]") and "would cut" in ln)
    msg = json.loads(line.split("=> ", 1)[1])["msg"]
    assert msg == ("node1: firewall_policy=deny would cut these listening services: "
                   "68/udp (dhclient), 5353/udp (python3), 9100/tcp (python3), 29500/tcp "
                   "(python3); allow each one (firewall_allow) or waive it (firewall_waive)"), msg
    assert nft_table(env, "node1") == before  # refused before anything changed
    ssh_works(env, "node1")

    deny = {"firewall_policy": "deny", "firewall_allow": [{"port": 9100}],
            "firewall_waive": ["68/udp", "5353/udp", "29500/tcp"]}
    converges(env, "node1", deny)
    table = nft_table(env, "node1")
    assert "policy drop" in table and "6818" in table and "61001-61100" in table
    assert reach(env, "host", "node1", 9100) == "HT"             # allowed
    assert reach(env, "host", "node1", 5353, "udp") == "timeout"  # waived: cut on purpose
    assert reach(env, "node2", "node1", 6818) == "ok"            # Slurm, between cluster hosts
    assert reach(env, "host", "node1", 6818) == "timeout"        # and not from elsewhere
    assert reach(env, "node2", "node1", 29500) == "ok"

    # A reboot: the boot unit loads the confirmed table again.
    lab.lab.restart("node1", log=lambda msg: None)
    booted(env, "node1")
    assert nft_table(env, "node1") == table
    ssh_works(env, "node1")
    after = play(env, "node1", deny)
    assert after.returncode == 0 and changed(after) == 0, after.stdout[-3000:]


def test_check_on_a_deleted_table_reports_drift_and_later_roles_still_run(env):
    lab = env["lab"]
    deny = {"firewall_policy": "deny", "firewall_allow": [{"port": 9100}],
            "firewall_waive": ["68/udp", "5353/udp", "29500/tcp"]}
    qos = {**deny, "roce_qos_interfaces": ["eth1"]}
    setup = play(env, "node1", qos, "--tags", "roce_qos")  # the next role, converged once
    assert setup.returncode == 0, setup.stdout[-3000:]
    # Drift in both: the firewall's table deleted, the QoS script edited.
    lab.exec("node1", ["nft", "delete", "table", "inet", "rdmaprov"])
    lab.exec("node1", ["sh", "-c", "echo '# edited' >> /usr/local/sbin/rdmaprov-roce-qos"])
    res = play(env, "node1", qos, "--check", "--tags", "roce_qos")
    assert res.returncode == 0, res.stdout[-4000:]
    assert "node1: drift: live table inet rdmaprov is absent; a real run loads it" in res.stdout
    # The next role ran under --check and reported its own drift.
    # (the script and the unit are one looped task: the edited script is its changed item)
    assert re.search(r"TASK \[rdmaprov\.cluster\.roce_qos : Install the QoS script and unit\] "
                     r"\*+\nchanged: \[node1\] => \(item=/usr/local/sbin/rdmaprov-roce-qos\)",
                     res.stdout), res.stdout[-3000:]
    assert nft_table(env, "node1") == ""  # --check changed nothing
    fixed = play(env, "node1", qos, "--tags", "roce_qos")
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    assert "policy drop" in nft_table(env, "node1")
    ssh_works(env, "node1")


# --- firewalld (node2) ------------------------------------------------------------------------
def test_firewalld_policy_adds_rules_and_survives_a_reboot(env):
    lab = env["lab"]
    lab.exec("node2", ["systemctl", "enable", "--now", "firewalld"])
    serve(env, "node2", "fw-rdzv", ["python3", "-c", TCP_ECHO, "0.0.0.0", "29500"])
    converges(env, "node2")
    rules = lab.exec("node2", ["firewall-cmd", "--policy=rdmaprov", "--list-rich-rules"]).stdout
    assert 'port port="29500" protocol="tcp" accept' in rules
    assert reach(env, "node1", "node2", 29500) == "ok"            # our policy
    assert reach(env, "host", "node2", 29500).startswith("blocked")  # the public zone rejects
    lab.lab.restart("node2", log=lambda msg: None)
    booted(env, "node2")
    assert lab.exec("node2", ["firewall-cmd", "--policy=rdmaprov",
                              "--list-rich-rules"]).stdout == rules
    serve(env, "node2", "fw-rdzv", ["python3", "-c", TCP_ECHO, "0.0.0.0", "29500"])
    assert reach(env, "node1", "node2", 29500) == "ok"
    ssh_works(env, "node2")
    after = play(env, "node2")
    assert after.returncode == 0 and changed(after) == 0, after.stdout[-3000:]


# --- ufw (node3) ------------------------------------------------------------------------------
def test_ufw_scoped_leaves_it_off_deny_switches_it_on_after_the_preflight(env):
    lab = env["lab"]
    lab.exec("node3", ["sh", "-c", "ufw --force reset >/dev/null && ufw status"])
    serve(env, "node3", "fw-exporter", ["python3", "-m", "http.server", "9100"])
    serve(env, "node3", "fw-rdzv", ["python3", "-c", TCP_ECHO, "0.0.0.0", "29500"])
    converges(env, "node3", {"firewall_backend": "ufw"})
    assert "Status: inactive" in lab.exec("node3", ["ufw", "status"]).stdout
    assert reach(env, "host", "node3", 9100) == "HT"

    refused = play(env, "node3", {"firewall_backend": "ufw", "firewall_policy": "deny"})
    assert refused.returncode != 0
    assert ("would cut these listening services: 9100/tcp (python3), 29500/tcp (python3);"
            in refused.stdout), refused.stdout[-3000:]
    assert "Status: inactive" in lab.exec("node3", ["ufw", "status"]).stdout

    deny = {"firewall_backend": "ufw", "firewall_policy": "deny",
            "firewall_allow": [{"port": 9100,
                                "sources": env["base"]["firewall_cluster_subnets"]}],
            "firewall_waive": ["29500/tcp"]}
    converges(env, "node3", deny)
    assert "Status: active" in lab.exec("node3", ["ufw", "status"]).stdout
    assert reach(env, "node1", "node3", 29500) == "ok"
    assert reach(env, "node1", "node3", 9100) == "HT"
    assert reach(env, "host", "node3", 9100) == "timeout"  # allowed to the cluster only
    lab.lab.restart("node3", log=lambda msg: None)
    booted(env, "node3")
    assert "Status: active" in lab.exec("node3", ["ufw", "status"]).stdout
    serve(env, "node3", "fw-rdzv", ["python3", "-c", TCP_ECHO, "0.0.0.0", "29500"])
    assert reach(env, "node1", "node3", 29500) == "ok"
    ssh_works(env, "node3")
    after = play(env, "node3", deny)
    assert after.returncode == 0 and changed(after) == 0, after.stdout[-3000:]


# --- Slurm between the three backends (issue 16, item 6) --------------------------------------
def test_srun_runs_across_the_lab_with_every_firewall_on(env):
    from rdmaprov.lab import slurm

    lab = env["lab"]
    # node1's deny below waives only the rendezvous port: the earlier tests' listeners go first
    # (the deny test's reboot clears them, but only when it gets that far).
    lab.exec("node1", ["sh", "-c", "systemctl stop 'fw-*'; systemctl reset-failed 'fw-*'; true"])
    # Slurm first, as on a cluster that already runs it (firewalld and ufw off meanwhile, since
    # their own defaults would block slurmd before rdmaprov's rules exist).
    lab.exec("node2", ["systemctl", "stop", "firewalld"])
    lab.exec("node3", ["ufw", "disable"])
    slurm.setup(lab.lab, log=lambda msg: None)
    lab.exec("node2", ["systemctl", "start", "firewalld"])
    runs = {"node1": {"firewall_policy": "deny", "firewall_waive": ["29500/tcp"]},
            "node2": {},
            "node3": {"firewall_backend": "ufw", "firewall_policy": "deny",
                      "firewall_waive": ["29500/tcp", "9100/tcp"]}}
    for node, extra in runs.items():
        res = play(env, node, extra)
        assert res.returncode == 0, res.stdout[-3000:]
        ssh_works(env, node)
        if node == "node1":  # slurmctld and slurmd's ports from the slurm.conf Slurm runs with
            assert "Slurm 6817,6818" in res.stdout, res.stdout[-3000:]
    assert "policy drop" in nft_table(env, "node1")
    assert "Status: active" in lab.exec("node3", ["ufw", "status"]).stdout
    assert 'port port="6817-6818" protocol="tcp"' in lab.exec(
        "node2", ["firewall-cmd", "--policy=rdmaprov", "--list-rich-rules"]).stdout
    slurm.wait_idle(lab.lab, ["node1", "node2", "node3"], timeout=120)
    out = lab.exec("node1", ["srun", "-N3", "--ntasks-per-node=1", "hostname"]).stdout
    assert sorted(out.split()) == ["node1", "node2", "node3"], out
