"""NCCL settings derived from rdma facts, and the NCCL_* lint (plugins/module_utils/rdma_nccl.py),
on the fixture sysfs trees (tests/fixtures/sysfs) and on hand-made facts for the edge cases."""

from __future__ import annotations

import copy
from pathlib import Path

import jinja2
import pytest

from rdmaprov.collection import rdma_nccl as nccl
from rdmaprov.collection import rdma_sysfs as sysfs

FIXTURES = Path(__file__).resolve().parents[2] / "tests/fixtures/sysfs"


def facts(tree: str) -> dict:
    return sysfs.collect(str(FIXTURES / tree))


def netdevs(tree: str) -> list[str]:
    return sysfs.list_netdevs(str(FIXTURES / tree))


# --- derivation -----------------------------------------------------------------------------------

def test_ib_hosts_get_exact_hca_list_of_active_ports_and_no_gid_index():
    got = nccl.derive(facts("ib_ndr"), ib_tc=106, socket_ifname="eno1")
    assert got["env"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_2:1",
                          "NCCL_SOCKET_IFNAME": "=eno1"}
    assert got["notes"] == ["mlx5_3:1 left out: state DOWN, physical state Polling"]
    assert nccl.derive(facts("ib_hdr"))["env"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}


def test_roce_picks_the_v2_ipv4_gid_and_the_qos_traffic_class():
    got = nccl.derive(facts("roce"), ib_tc=106)
    # index 2 holds the same IPv4 GID as RoCE v1, 1 and 5 are v2 but link-local / IPv6
    assert got["env"] == {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_IB_GID_INDEX": "3",
                          "NCCL_IB_TC": "106"}
    assert nccl.derive(facts("roce"))["env"].get("NCCL_IB_TC") is None


def test_bond_is_excluded_and_differing_gid_indices_use_address_family():
    got = nccl.derive(facts("roce_bond"))
    assert got["env"]["NCCL_IB_HCA"] == "=mlx5_2:1,mlx5_3:1"
    assert "NCCL_IB_GID_INDEX" not in got["env"]
    assert got["env"]["NCCL_IB_ADDR_FAMILY"] == "AF_INET"
    assert got["env"]["NCCL_IB_ROCE_VERSION_NUM"] == "2"
    assert any("mlx5_bond_0:1 left out: bond bond0" in n for n in got["notes"])
    assert any("mlx5_2:1=3, mlx5_3:1=5" in n for n in got["notes"])


def test_gid_choice_is_lowest_v2_ipv4_whatever_the_order():
    port = {"gids": [
        {"index": 7, "gid": "0000:0000:0000:0000:0000:ffff:0a00:0002", "type": "RoCE v2"},
        {"index": 5, "gid": "0000:0000:0000:0000:0000:ffff:0a00:0001", "type": "RoCE v2"},
        {"index": 4, "gid": "0000:0000:0000:0000:0000:ffff:0a00:0001", "type": "RoCE v1"},
        {"index": 1, "gid": "fe80:0000:0000:0000:0e42:a1ff:fe5e:10a0", "type": "RoCE v2"}]}
    assert nccl.roce_v2_ipv4_index(port) == 5
    port["gids"] = [g for g in port["gids"] if g["type"] != "RoCE v2" or g["index"] == 1]
    assert nccl.roce_v2_ipv4_index(port) is None


def test_roce_port_without_ipv4_gid_is_left_out_with_reason():
    data = copy.deepcopy(facts("roce"))
    port = data["devices"][0]["ports"][0]
    port["gids"] = [g for g in port["gids"] if sysfs.gid_kind(g["gid"]) != "ipv4-mapped"]
    got = nccl.derive(data)
    assert "NCCL_IB_HCA" not in got["env"]
    assert any("without a RoCE v2 IPv4 GID" in n for n in got["notes"])
    assert got["notes"][0].startswith("no usable RDMA port")


def test_no_devices_says_why():
    got = nccl.derive(sysfs.collect("/nonexistent-sysfs"), socket_ifname="eth0")
    assert got["env"] == {"NCCL_SOCKET_IFNAME": "=eth0"}
    assert got["notes"][0].startswith("no RDMA devices: no /sys/class/infiniband_verbs")


# --- the nccl_env role's choices (rdma_facts runs them) -----------------------------------------

NET = {"interfaces": ["lo", "eth0", "eth1"],
       "lo": {"ipv4": {"address": "127.0.0.1"}},
       "eth0": {"ipv4": {"address": "192.0.2.5"}},
       "eth1": {"ipv4": {"address": "10.0.0.7"}, "ipv4_secondaries": [{"address": "10.0.0.9"}]}}


def test_socket_ifname_given_then_connection_then_default_route_then_address():
    facts = {**NET, "rdmaprov": {"ssh_interface": "eth1"},
             "default_ipv4": {"interface": "eth0", "address": "192.0.2.5"}}
    assert nccl.socket_ifname("ib0", facts, "10.0.0.7") == "ib0"
    assert nccl.socket_ifname("", facts, "10.0.0.7") == "eth1"
    # preflight found none: the default route's, before the address's
    facts["rdmaprov"] = {"ssh_interface": ""}
    assert nccl.socket_ifname("", facts, "10.0.0.7") == "eth0"
    # the lab: no default route, the interface holding ansible_host's address
    del facts["default_ipv4"]
    assert nccl.socket_ifname(None, facts, "10.0.0.7") == "eth1"
    assert nccl.socket_ifname(None, facts, "10.0.0.9") == "eth1"  # a secondary address
    # a name (not an address), an address no interface holds, no facts: none
    assert nccl.socket_ifname("", facts, "node1") == ""
    assert nccl.socket_ifname("", facts, "10.9.9.9") == ""
    assert nccl.socket_ifname("", None, "10.0.0.7") == ""


def test_ib_tc_own_then_roce_qos_then_none():
    assert nccl.ib_tc(96, 106) == 96
    assert nccl.ib_tc(0, 106) == 0
    assert nccl.ib_tc(-1, 106) == 106
    assert nccl.ib_tc(None, "106") == 106  # roce_qos_nccl_ib_tc is text (qos_tos)
    assert nccl.ib_tc(-1, -1) is None
    assert nccl.ib_tc(-1) is None


def test_conf_puts_extra_on_top_sorted_by_name_with_the_first_note():
    derived = nccl.derive(facts("ib_ndr"), socket_ifname="eno1")
    got = nccl.conf(derived, {"NCCL_IB_TIMEOUT": 22, "nccl_debug": "WARN",
                              "NCCL_SOCKET_IFNAME": "=eth9"})
    assert got["settings"] == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_2:1",
                               "NCCL_SOCKET_IFNAME": "=eth9", "NCCL_IB_TIMEOUT": "22",
                               "nccl_debug": "WARN"}
    # by name, case folded: the order the role's template wrote with Jinja's dictsort
    assert got["lines"] == ["nccl_debug=WARN", "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1",
                            "NCCL_IB_TIMEOUT=22", "NCCL_SOCKET_IFNAME==eth9"]
    dictsort = jinja2.Environment().from_string(
        "{% for k, v in s | dictsort %}{{ k }}={{ v }}\n{% endfor %}")
    assert got["lines"] == dictsort.render(s=got["settings"]).splitlines()
    assert got["summary"] == ("sets NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_TIMEOUT, nccl_debug"
                              " (mlx5_3:1 left out: state DOWN, physical state Polling)")
    bare = nccl.conf({"env": {}, "notes": []})
    assert bare == {"settings": {}, "lines": [], "summary": "sets no NCCL variable"}


def test_role_params_from_the_roles_settings():
    settings = {"use_pyverbs": True, "socket_ifname": "eth1", "address": "10.0.0.7",
                "ib_tc": "96", "extra": {"NCCL_IB_TIMEOUT": 22}, "lint_fail": True,
                "conf_path": "/etc/nccl.conf", "verify": True}
    assert nccl.role_params(settings) == {
        "use_pyverbs": "yes", "nccl_socket_ifname": "eth1", "nccl_socket_facts": {},
        "nccl_socket_address": "10.0.0.7", "nccl_ib_tc": 96, "nccl_ib_tc_roce_qos": None,
        "nccl_extra": {"NCCL_IB_TIMEOUT": 22}}
    got = nccl.role_params({**settings, "use_pyverbs": "auto", "ib_tc_roce_qos": "106",
                            "facts": {"interfaces": []}})
    assert (got["use_pyverbs"], got["nccl_ib_tc_roce_qos"], got["nccl_socket_facts"]) == (
        "auto", 106, {"interfaces": []})
    with pytest.raises(ValueError, match="nccl_env_use_pyverbs must be auto, yes or no"):
        nccl.role_params({**settings, "use_pyverbs": "maybe"})


def test_conf_check_names_the_lines_the_file_lacks():
    want = {"path": "/etc/nccl.conf", "lines": ["A=1", "B==x", "A=1"], "summary": "sets A, B"}
    assert nccl.conf_check(want, "# note\nA=1\nB==x\n") == (
        True, "nccl_env: /etc/nccl.conf sets A, B")
    assert nccl.conf_check(want, "A=1\nB=x\n") == (
        False, "nccl_env: /etc/nccl.conf lacks ['B==x']")
    assert nccl.conf_check(want, "") == (False, "nccl_env: /etc/nccl.conf lacks ['A=1', 'B==x']")
    assert nccl.conf_check(want, None) == (False, "nccl_env: /etc/nccl.conf cannot be read")


# --- lint -----------------------------------------------------------------------------------------

def _levels(findings: list[dict]) -> dict[str, str]:
    return {f["variable"]: f["level"] for f in findings}


@pytest.mark.parametrize("name", ["NCCL_IB_ENABLE", "NCCL_IB_ENABLE_RDMA", "NCCL_P2P_ENABLE"])
def test_names_that_do_not_exist_are_errors_with_the_real_switch(name):
    (finding,) = nccl.lint({name: "1"})
    assert finding["level"] == "error" and "does not exist" in finding["message"]
    assert "_DISABLE=0" in finding["message"]


def test_typos_get_a_did_you_mean_and_real_names_pass():
    (finding,) = nccl.lint({"NCCL_SOCKET_IFNAM": "eth0"})
    assert finding["level"] == "warning"
    assert "did you mean NCCL_SOCKET_IFNAME?" in finding["message"]
    assert nccl.lint({"NCCL_IB_HCA": "mlx5", "NCCL_DEBUG": "INFO", "PATH": "/bin",
                      "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "=eth0"}) == []
    (dep,) = nccl.lint({"NCCL_IB_CUDA_SUPPORT": "1"})
    assert dep["level"] == "warning" and "removed in NCCL 2.4.0" in dep["message"]
    assert dep["fix"] == "Use NCCL_NET_GDR_LEVEL instead."


def test_names_others_read_are_left_alone():
    """NVIDIA's CUDA images set NCCL_VERSION as a label (the H200's venv has it); net plugins
    and nccl-tests read their own NCCL_ names: none of them is a finding."""
    assert nccl.lint({"NCCL_VERSION": "2.28.3-1", "NCCL_UCX_TLS": "rc_x",
                      "NCCL_TESTS_SPLIT_MASK": "0x1"}) == []


def test_hca_naming_a_down_port_or_a_missing_device():
    data = facts("ib_ndr")
    got = nccl.lint({"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}, data)
    assert len(got) == 1 and "mlx5_3:1, which is DOWN (Polling)" in got[0]["message"]
    got = nccl.lint({"NCCL_IB_HCA": "mlx5_9"}, data)
    assert got[0]["level"] == "error" and "not on this host" in got[0]["message"]
    assert nccl.lint({"NCCL_IB_HCA": "^=mlx5_3"}, data) == []
    # a prefix that takes in a down port is caught too, with the prefix warning
    got = nccl.lint({"NCCL_IB_HCA": "mlx5"}, data)
    assert [f["level"] for f in got] == ["warning", "error"]
    assert "is a prefix" in got[0]["message"] and "mlx5_3:1" in got[1]["message"]


def test_gid_index_pointing_at_link_local_v1_or_nothing():
    data = facts("roce")
    assert nccl.lint({"NCCL_IB_GID_INDEX": "3"}, data) == []
    msgs = {i: nccl.lint({"NCCL_IB_GID_INDEX": str(i)}, data) for i in (0, 1, 2, 5, 9)}
    assert "not routable" in msgs[0][0]["message"]          # link-local RoCE v1
    assert "link-local" in msgs[1][0]["message"]            # link-local RoCE v2
    assert "RoCE v1" in msgs[2][0]["message"]               # IPv4, but v1
    assert msgs[5][0]["level"] == "warning"                 # global IPv6 v2
    assert "has no GID there" in msgs[9][0]["message"]
    assert all("index 3" in f["message"] for i in (0, 1, 2, 9) for f in msgs[i])
    # only the ports NCCL would use count: the down port is not checked
    assert all("mlx5_1" not in f["message"] for fs in msgs.values() for f in fs)


def test_socket_ifname_naming_no_interface():
    got = nccl.lint({"NCCL_SOCKET_IFNAME": "=eth1"}, None, netdevs("roce"))
    assert got[0]["level"] == "error" and "names no interface" in got[0]["message"]
    assert nccl.lint({"NCCL_SOCKET_IFNAME": "ens1"}, None, netdevs("roce")) == []
    assert nccl.lint({"NCCL_SOCKET_IFNAME": "^docker,lo"}, None, netdevs("roce")) == []


def test_rdma_switched_off_while_ports_are_active():
    got = nccl.lint({"NCCL_IB_DISABLE": "1", "NCCL_NET": "Socket"}, facts("ib_hdr"))
    assert _levels(got) == {"NCCL_IB_DISABLE": "warning", "NCCL_NET": "warning"}


def test_bad_values():
    got = _levels(nccl.lint({"NCCL_IB_GID_INDEX": "three", "NCCL_IB_TC": "300"}))
    assert got == {"NCCL_IB_GID_INDEX": "error", "NCCL_IB_TC": "error"}


def test_env_file_parsing():
    text = "# written by rdmaprov\nNCCL_IB_HCA==mlx5_0:1\nexport NCCL_DEBUG='WARN'\n\nbogus\n"
    assert nccl.parse_env_text(text) == {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_DEBUG": "WARN"}


def test_derived_settings_lint_clean_on_every_fixture():
    for tree in ("ib_hdr", "ib_ndr", "roce", "roce_bond", "no_devices"):
        data = facts(tree)
        env = nccl.derive(data, ib_tc=106, socket_ifname=netdevs(tree)[0])["env"]
        assert nccl.lint(env, data, netdevs(tree)) == [], tree
