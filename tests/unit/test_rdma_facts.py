"""rdma_facts' logic (plugins/module_utils/rdma_sysfs.py, rdma_pyverbs.py) on fixture sysfs trees
shaped like real mlx5 hosts (tests/fixtures/sysfs, sources in SOURCES.md), and the module itself
run by ansible against those trees and against this machine's real /sys."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rdmaprov.collection import rdma_pyverbs as pyverbs_path
from rdmaprov.collection import rdma_sysfs as sysfs

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/sysfs"


def facts(tree: str) -> dict:
    return sysfs.collect(str(FIXTURES / tree))


def ports(data: dict) -> dict[str, dict]:
    return {f"{d['name']}:{p['port']}": p for d in data["devices"] for p in d["ports"]}


def _same_tree(a: Path, b: Path) -> list[str]:
    cmp = filecmp.dircmp(a, b)
    diffs = [str(a / n) for n in cmp.left_only + cmp.right_only + cmp.diff_files]
    for sub in cmp.common_dirs:
        diffs += _same_tree(a / sub, b / sub)
    return diffs


def test_committed_trees_are_the_builders_output(tmp_path):
    sys.path.insert(0, str(FIXTURES))
    try:
        import make_trees
    finally:
        sys.path.remove(str(FIXTURES))
    make_trees.build(tmp_path)
    for name in make_trees.TREES:
        assert _same_tree(FIXTURES / name, tmp_path / name) == [], name


# --- attribute parsers, against the formats of drivers/infiniband/core/sysfs.c --------------------

@pytest.mark.parametrize(("text", "gbps"), [
    ("400 Gb/sec (4X NDR)", 400), ("200 Gb/sec (4X HDR)", 200), ("2.5 Gb/sec (1X SDR)", 2.5),
    ("100 Gb/sec (2X HDR)", 100), ("56 Gb/sec (4X FDR)", 56), ("", None), ("fast", None),
])
def test_parse_rate(text, gbps):
    assert sysfs.parse_rate(text) == gbps


def test_parse_state_and_lid():
    assert sysfs.parse_state("4: ACTIVE") == "ACTIVE"
    assert sysfs.parse_state("1: DOWN") == "DOWN"
    assert sysfs.parse_state("5: LinkUp") == "LinkUp"
    assert sysfs.parse_state("7: Phy Test") == "Phy Test"
    assert sysfs.parse_lid("0x1a") == 26
    assert sysfs.parse_lid("zz") is None


def test_gid_kinds_and_types():
    assert sysfs.gid_kind("0000:0000:0000:0000:0000:ffff:0a0a:000b") == "ipv4-mapped"
    assert sysfs.gid_kind("fe80:0000:0000:0000:0e42:a1ff:fe5e:10a0") == "link-local"
    assert sysfs.gid_kind("fd00:0010:0000:0000:0e42:a1ff:fe5e:10a0") == "ipv6"
    assert sysfs.gid_kind(sysfs.ZERO_GID) == "zero"
    assert sysfs.normalise_gid_type("IB/RoCE v1", "Ethernet") == "RoCE v1"
    assert sysfs.normalise_gid_type("IB/RoCE v1", "InfiniBand") == "IB"
    assert sysfs.normalise_gid_type("RoCE v2", "Ethernet") == "RoCE v2"


@pytest.mark.parametrize(("mtu", "ib_mtu"), [(9000, 4096), (4200, 4096), (4000, 2048),
                                              (1500, 1024), (1024, 512), (100, None)])
def test_roce_active_mtu_leaves_room_for_headers(mtu, ib_mtu):
    assert sysfs.roce_active_mtu(mtu) == ib_mtu


# --- whole trees ----------------------------------------------------------------------------------

def test_ib_hdr():
    data = facts("ib_hdr")
    assert data["kernel"]["uverbs"] is True and data["source"] == "sysfs"
    assert [d["name"] for d in data["devices"]] == ["mlx5_0", "mlx5_1"]
    dev = data["devices"][0]
    assert (dev["fw_ver"], dev["board_id"], dev["hca_type"], dev["node_guid"]) == \
        ("20.31.1014", "MT_0000000223", "MT4123", "0c42:a103:0065:1a20")
    p = ports(data)["mlx5_1:1"]
    assert (p["state"], p["phys_state"], p["rate_gbps"], p["link_layer"]) == \
        ("ACTIVE", "LinkUp", 200, "InfiniBand")
    assert (p["lid"], p["netdev"], p["active_mtu"], p["bond"]) == (0x1B, "ib1", 4096, None)
    assert p["gids"] == [{"index": 0, "gid": "fe80:0000:0000:0000:0c42:a103:0065:1a21",
                          "type": "IB"}]


def test_ib_ndr_down_port_and_error_counters():
    by_port = ports(facts("ib_ndr"))
    assert {k: (p["state"], p["rate_gbps"]) for k, p in by_port.items()} == {
        "mlx5_0:1": ("ACTIVE", 400), "mlx5_1:1": ("ACTIVE", 400),
        "mlx5_2:1": ("ACTIVE", 400), "mlx5_3:1": ("DOWN", 10)}
    assert by_port["mlx5_3:1"]["phys_state"] == "Polling"
    errors = by_port["mlx5_2:1"]["counters"]
    assert (errors["symbol_error"], errors["link_downed"], errors["port_rcv_errors"]) == (17, 2, 3)
    # traffic volume is not an error counter
    assert "port_xmit_data" not in errors


def test_roce_gids_types_and_netdevs():
    by_port = ports(facts("roce"))
    p = by_port["mlx5_0:1"]
    assert (p["link_layer"], p["lid"], p["netdev"], p["active_mtu"], p["rate_gbps"]) == \
        ("Ethernet", None, "ens1f0np0", 4096, 100)
    assert [(g["index"], g["type"], sysfs.gid_kind(g["gid"])) for g in p["gids"]] == [
        (0, "RoCE v1", "link-local"), (1, "RoCE v2", "link-local"),
        (2, "RoCE v1", "ipv4-mapped"), (3, "RoCE v2", "ipv4-mapped"),
        (4, "RoCE v1", "ipv6"), (5, "RoCE v2", "ipv6")]
    assert all(g["netdev"] == "ens1f0np0" for g in p["gids"])
    assert p["hw_counters"]["np_cnp_sent"] == 12 and p["hw_counters"]["rp_cnp_handled"] == 7
    # rx_write_requests is traffic, not a congestion / loss counter
    assert "rx_write_requests" not in p["hw_counters"]
    assert by_port["mlx5_1:1"]["state"] == "DOWN"


def test_roce_bond_is_marked():
    by_port = ports(facts("roce_bond"))
    assert by_port["mlx5_bond_0:1"]["netdev"] == "bond0"
    assert by_port["mlx5_bond_0:1"]["bond"] == "bond0"
    assert by_port["mlx5_2:1"]["bond"] is None
    v4 = [g["index"] for g in by_port["mlx5_3:1"]["gids"]
          if sysfs.gid_kind(g["gid"]) == "ipv4-mapped"]
    assert v4 == [4, 5]


def test_enslaved_netdev_reports_its_bond():
    assert sysfs.bond_of(str(FIXTURES / "roce_bond"), "ens1f1np1") == "bond0"
    assert sysfs.bond_of(str(FIXTURES / "roce_bond"), "ens3np0") is None


def test_contract_keys_present_on_every_port():
    required_dev = {"name", "fw_ver", "board_id", "node_guid", "hca_type", "ports"}
    required_port = {"port", "state", "phys_state", "rate_gbps", "link_layer", "active_mtu",
                     "lid", "netdev", "gids"}
    for tree in ("ib_hdr", "ib_ndr", "roce", "roce_bond"):
        data = facts(tree)
        # the contract's keys, plus gpus (an extra: None for a bare sysfs tree like these)
        assert set(data) == {"kernel", "rdma_core_version", "ofed_version", "source", "devices",
                             "gpus"}
        assert data["gpus"] is None
        for dev in data["devices"]:
            assert required_dev <= set(dev)
            for port in dev["ports"]:
                assert required_port <= set(port), (tree, dev["name"])
                assert all(set(g) >= {"index", "gid", "type"} for g in port["gids"])


# --- hosts without RDMA ---------------------------------------------------------------------------

def test_no_rdma_kernel_is_not_a_failure(tmp_path):
    (tmp_path / "class/net/eth0").mkdir(parents=True)
    data = sysfs.collect(str(tmp_path))
    assert data["devices"] == [] and data["source"] == "none"
    assert data["kernel"]["uverbs"] is False
    assert data["kernel"]["reason"] == ("no /sys/class/infiniband_verbs: "
                                        "the kernel has no RDMA (ib_uverbs) support")
    assert {n: m["state"] for n, m in data["kernel"]["modules"].items()} == {
        "ib_core": "absent", "ib_uverbs": "absent", "rdma_ucm": "absent"}


def test_uverbs_without_devices_says_so():
    data = facts("no_devices")
    assert data["devices"] == [] and data["kernel"]["uverbs"] is True
    assert data["kernel"]["reason"].startswith("ib_uverbs is loaded but /sys/class/infiniband "
                                               "is empty: no RDMA devices")
    assert data["kernel"]["modules"]["ib_uverbs"] == {
        "state": "loaded", "evidence": "/sys/module/ib_uverbs/initstate live"}


def test_devices_without_uverbs(tmp_path):
    shutil.copytree(FIXTURES / "ib_hdr", tmp_path / "t", symlinks=True)
    shutil.rmtree(tmp_path / "t/class/infiniband_verbs")
    kernel = sysfs.collect(str(tmp_path / "t"))["kernel"]
    assert kernel["uverbs"] is False and "ib_uverbs is not in the kernel" in kernel["reason"]


# --- versions -------------------------------------------------------------------------------------

def test_stack_versions_from_tools():
    answers = {
        "ofed_info": (0, "MLNX_OFED_LINUX-23.10-1.1.9.0:\n"),
        "dpkg-query": (0, "2307mlnx47-1.2310119\tii "),
    }
    got = sysfs.stack_versions(lambda argv: answers.get(argv[0], (127, "")))
    assert got == {"ofed_version": "MLNX_OFED_LINUX-23.10-1.1.9.0",
                   "rdma_core_version": "2307mlnx47"}
    rpm_only = {"dpkg-query": (1, ""), "rpm": (0, "48.0")}
    got = sysfs.stack_versions(lambda argv: rpm_only.get(argv[0], (127, "")))
    assert got == {"ofed_version": None, "rdma_core_version": "48.0"}
    removed = {"dpkg-query": (0, "44.0-2\trc ")}
    assert sysfs.stack_versions(lambda argv: removed.get(argv[0], (127, "")))[
        "rdma_core_version"] is None


# --- the pyverbs path, with a stand-in shaped like pyverbs ----------------------------------------

class FakeRDMAError(Exception):
    pass


class FakeError(Exception):
    pass


def fake_pyverbs(devices: dict | None):
    """A namespace like rdma_pyverbs.load() returns. devices None: listing raises, as pyverbs
    does on a kernel without uverbs."""

    class Attr:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class Context:
        def __init__(self, name):
            self.dev = devices[name]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def query_device(self):
            return Attr(fw_ver=self.dev["fw"].encode(), node_guid=self.dev["guid"],
                        phys_port_cnt=len(self.dev["ports"]))

        def query_port(self, port):
            return Attr(**self.dev["ports"][port - 1]["attr"])

        def query_gid(self, port, index):
            gid = self.dev["ports"][port - 1]["gids"].get(index)
            if gid is None:
                raise FakeRDMAError("Failed to query gid")
            return Attr(gid=gid[0])

        def query_gid_type(self, port, index):
            return self.dev["ports"][port - 1]["gids"][index][1]

    class Device:
        def __init__(self, name):
            self.name = name.encode()

    class DeviceModule:
        @staticmethod
        def get_device_list():
            if devices is None:
                raise FakeRDMAError("Failed to get devices list")
            return [Device(n) for n in devices]

    DeviceModule.Context = Context
    return {"device": DeviceModule, "PyverbsRDMAError": FakeRDMAError, "PyverbsError": FakeError}


def test_pyverbs_rdma_error_means_no_rdma_in_kernel(tmp_path):
    data = pyverbs_path.gather("/sys", "yes", None, loader=lambda: fake_pyverbs(None))
    assert data["kernel"]["uverbs"] is False
    assert data["kernel"]["reason"].startswith("no RDMA support in this kernel")
    assert data["devices"] == [] or data["source"] == "sysfs"


def test_pyverbs_missing_with_yes_is_an_error_and_auto_falls_back():
    with pytest.raises(pyverbs_path.PyverbsMissing):
        pyverbs_path.gather("/sys", "yes", None, loader=lambda: None)
    data = pyverbs_path.gather(str(FIXTURES / "roce"), "auto", None, loader=lambda: None)
    assert data["source"] == "sysfs"


def test_pyverbs_facts_merge_sysfs_extras(monkeypatch):
    # mlx5_0 of the roce fixture as the verbs would report it: state 4, MTU enum 5 (4096),
    # speed EDR (32) x width 4X (2), Ethernet (2), GIDs 0..3 with sysfs GID types 0/1.
    ll = "fe80::e42:a1ff:fe5e:10a0"
    devices = {"mlx5_0": {"fw": "22.36.1010", "guid": 0x0C42A103005E10A0, "ports": [
        {"attr": {"state": 4, "phys_state": 5, "active_mtu": 5, "lid": 0, "link_layer": 2,
                  "active_speed": 32, "active_width": 2, "gid_tbl_len": 6},
         "gids": {0: (ll, 0), 1: (ll, 1), 2: ("::ffff:10.10.0.11", 0),
                  3: ("::ffff:10.10.0.11", 1)}}]}}
    pv = fake_pyverbs(devices)
    data = pyverbs_path.collect(pv, str(FIXTURES / "roce"))
    assert data["source"] == "pyverbs"
    dev = data["devices"][0]
    assert dev["node_guid"] == "0c42:a103:005e:10a0" and dev["fw_ver"] == "22.36.1010"
    assert dev["board_id"] == "MT_0000000359"
    port = dev["ports"][0]
    assert (port["state"], port["phys_state"], port["rate_gbps"], port["active_mtu"]) == \
        ("ACTIVE", "LinkUp", 100, 4096)
    assert (port["link_layer"], port["lid"], port["netdev"]) == ("Ethernet", None, "ens1f0np0")
    assert [(g["index"], g["type"]) for g in port["gids"]] == \
        [(0, "RoCE v1"), (1, "RoCE v2"), (2, "RoCE v1"), (3, "RoCE v2")]
    assert port["gids"][3]["gid"] == "0000:0000:0000:0000:0000:ffff:0a0a:000b"
    assert port["hw_counters"]["np_cnp_sent"] == 12


# --- the module, run by Ansible -------------------------------------------------------------------

def _ansible(tmp_path, args: str, check: bool = False) -> tuple[int, dict]:
    proc = _adhoc(tmp_path, args, check)
    # The ad-hoc default output is "localhost | STATUS => {json}" for one host.
    _, sep, body = proc.stdout.partition("localhost | ")
    assert sep, proc.stdout + proc.stderr
    return proc.returncode, json.loads(body.split("=> ", 1)[1])


def _adhoc(tmp_path, args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    colls = tmp_path / "collections"
    (colls / "ansible_collections/rdmaprov").mkdir(parents=True)
    (colls / "ansible_collections/rdmaprov/cluster").symlink_to(ROOT)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(colls), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    argv = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local",
            "-m", "rdmaprov.cluster.rdma_facts", "-a", args]
    if check:
        argv.append("--check")
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def test_module_on_a_fixture_in_check_mode(tmp_path):
    rc, res = _ansible(tmp_path, f"sysfs_root={FIXTURES / 'ib_ndr'} versions=false", check=True)
    assert rc == 0 and res["changed"] is False
    assert res["ansible_facts"]["rdma"] == res["rdma"]
    assert [p["state"] for d in res["rdma"]["devices"] for p in d["ports"]] == \
        ["ACTIVE", "ACTIVE", "ACTIVE", "DOWN"]


@pytest.mark.skipif(os.path.exists("/sys/class/infiniband"), reason="this host has RDMA devices")
def test_module_on_this_host_without_rdma(tmp_path):
    rc, res = _ansible(tmp_path, "")
    assert rc == 0 and res["rdma"]["devices"] == [] and res["rdma"]["source"] == "none"
    assert res["rdma"]["kernel"]["uverbs"] is False and res["rdma"]["kernel"]["reason"]


def test_module_fails_on_a_lint_error_only_when_asked(tmp_path):
    base = f"sysfs_root={FIXTURES / 'ib_ndr'} versions=false"
    bad = base + " nccl_lint_env={'NCCL_IB_ENABLE':'1'}"
    rc, res = _ansible(tmp_path / "report", bad)
    assert rc == 0 and res["nccl"]["lint"][0]["level"] == "error"
    rc, res = _ansible(tmp_path / "fail", bad + " nccl_lint_fail=true")
    assert rc != 0 and res["msg"].startswith("NCCL lint: NCCL_IB_ENABLE does not exist in NCCL")
    good = base + " nccl_lint_env={'NCCL_IB_DISABLE':'0'} nccl_lint_fail=true"
    rc, res = _ansible(tmp_path / "good", good)
    assert rc == 0 and res["nccl"]["lint"] == []


def test_module_rejects_bad_choice(tmp_path):
    rc, res = _ansible(tmp_path, "use_pyverbs=maybe")
    assert rc != 0 and "use_pyverbs" in res["msg"]


def test_module_documentation_is_valid_yaml_and_matches_the_argument_spec():
    import ast

    import yaml

    tree = ast.parse((ROOT / "plugins/modules/rdma_facts.py").read_text())
    docs = {n.targets[0].id: n.value.value for n in tree.body
            if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "").isupper()}
    parsed = {k: yaml.safe_load(v) for k, v in docs.items()}
    assert set(parsed["DOCUMENTATION"]["options"]) == {
        "sysfs_root", "use_pyverbs", "versions", "nccl_socket_ifname", "nccl_socket_facts",
        "nccl_socket_address", "nccl_ib_tc", "nccl_ib_tc_roce_qos", "nccl_extra",
        "nccl_lint_env", "nccl_lint_fail", "settings", "verify_conf"}
    assert set(parsed["RETURN"]) == {"rdma", "nccl", "rdmaprov_report"}
    assert parsed["EXAMPLES"][0]["rdmaprov.cluster.rdma_facts"] is None


def test_module_derives_what_the_nccl_env_role_writes(tmp_path):
    """The nccl_env role's call: the socket interface found in the facts, NCCL_IB_TC from
    roce_qos, nccl_env_extra on top, linted."""
    args = {"sysfs_root": str(FIXTURES / "roce"), "versions": False, "nccl_socket_ifname": "",
            "nccl_socket_facts": {"interfaces": ["lo", "eth1"], "eth1": {"ipv4": {
                "address": "10.0.0.7"}}, "rdmaprov": {"ssh_interface": ""}},
            "nccl_socket_address": "10.0.0.7", "nccl_ib_tc": -1, "nccl_ib_tc_roce_qos": "106",
            "nccl_extra": {"NCCL_IB_TIMEOUT": 22}, "nccl_lint_fail": True}
    rc, res = _ansible(tmp_path, json.dumps(args))
    assert rc == 0, res
    assert res["nccl"]["lines"] == ["NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_0:1",
                                    "NCCL_IB_TC=106", "NCCL_IB_TIMEOUT=22",
                                    "NCCL_SOCKET_IFNAME==eth1"]
    assert res["nccl"]["lint"] == []
    rc, res = _ansible(tmp_path / "bad", json.dumps({**args, "nccl_extra": {
        "NCCL_IB_ENABLE": "1"}}))
    assert rc != 0 and res["msg"].startswith("NCCL lint: NCCL_IB_ENABLE does not exist in NCCL")


def test_module_with_the_nccl_env_roles_settings_then_its_read_back(tmp_path):
    """The nccl_env role's calls: its settings (what the action plugin fills) give the same
    derivation as the options one by one; verify_conf reads the written file back."""
    conf = tmp_path / "nccl.conf"
    settings = {"use_pyverbs": "no", "socket_ifname": "", "address": "10.0.0.7", "ib_tc": -1,
                "extra": {"NCCL_IB_TIMEOUT": 22}, "lint_fail": True, "conf_path": str(conf),
                "verify": True, "ib_tc_roce_qos": "106",
                "facts": {"interfaces": ["lo", "eth1"], "eth1": {"ipv4": {"address": "10.0.0.7"}},
                          "rdmaprov": {"ssh_interface": ""}}}
    args = {"sysfs_root": str(FIXTURES / "roce"), "versions": False, "settings": settings}
    rc, res = _ansible(tmp_path / "derive", json.dumps(args))
    assert rc == 0, res
    nccl = res["nccl"]
    assert nccl["lines"] == ["NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_TC=106",
                             "NCCL_IB_TIMEOUT=22", "NCCL_SOCKET_IFNAME==eth1"]
    assert (nccl["path"], nccl["verify"]) == (str(conf), True)
    rc, res = _ansible(tmp_path / "lint", json.dumps(
        {**args, "settings": {**settings, "extra": {"NCCL_IB_ENABLE": "1"}}}))
    assert rc != 0 and res["msg"].startswith("NCCL lint: NCCL_IB_ENABLE does not exist in NCCL")
    # The read-back: every line there, one missing, under --check, not wanted.
    conf.write_text("# header\n" + "\n".join(nccl["lines"]) + "\n")
    rc, res = _ansible(tmp_path / "ok", json.dumps({"verify_conf": nccl}))
    assert rc == 0 and res["msg"] == f"nccl_env: {conf} {nccl['summary']}", res
    assert res["rdmaprov_report"] == [res["msg"]]  # printed as the host's report
    conf.write_text("\n".join(line for line in nccl["lines"] if "TC=" not in line) + "\n")
    rc, res = _ansible(tmp_path / "lacks", json.dumps({"verify_conf": nccl}))
    assert rc != 0 and res["msg"] == f"nccl_env: {conf} lacks ['NCCL_IB_TC=106']", res
    for name, verify, check in (("check", nccl, True), ("off", {**nccl, "verify": False}, False)):
        conf.unlink(missing_ok=True)
        proc = _adhoc(tmp_path / name, json.dumps({"verify_conf": verify}), check=check)
        assert proc.returncode == 0 and "localhost | SKIPPED" in proc.stdout, proc.stdout


def test_the_action_adds_the_hosts_facts_and_roce_qos_tc(monkeypatch):
    import importlib
    from unittest import mock

    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.action import ActionBase
    from ansible.template import Templar
    action_mod = importlib.import_module(
        "ansible_collections.rdmaprov.cluster.plugins.action.rdma_facts")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    task = mock.MagicMock()
    task.resolved_action = "rdmaprov.cluster.rdma_facts"
    variables = {"inventory_hostname": "n1", "ansible_host": "10.0.0.7",
                 "nccl_env_socket_ifname": "", "nccl_env_ib_tc": -1, "nccl_env_verify": True,
                 "roce_qos_nccl_ib_tc": "106", "ansible_facts": {"interfaces": ["eth1"]}}
    calls = []

    def run(args):
        task.args = args
        action = action_mod.ActionModule(task, mock.MagicMock(), mock.MagicMock(), None,
                                         Templar(loader=DataLoader(), variables=variables), None)
        monkeypatch.setattr(action, "_execute_module", lambda module_name, module_args,
                            task_vars: calls.append(module_args) or {})
        action.run(task_vars=variables)
        return calls[-1]

    assert run({"settings": {}})["settings"] == {
        "socket_ifname": "", "ib_tc": -1, "verify": True, "address": "10.0.0.7",
        "facts": {"interfaces": ["eth1"]}, "ib_tc_roce_qos": "106"}
    assert run({"versions": False}) == {"versions": False}  # the raw module: as given
