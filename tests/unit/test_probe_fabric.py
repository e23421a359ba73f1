"""Fabric consistency across hosts (rdmaprov/probe/fabric.py) on facts from the fixture trees."""

from __future__ import annotations

import copy
from pathlib import Path

from rdmaprov.collection import rdma_sysfs as sysfs
from rdmaprov.probe import fabric

FIXTURES = Path(__file__).resolve().parents[2] / "tests/fixtures/sysfs"


def ndr_host(**changes) -> dict:
    data = copy.deepcopy(sysfs.collect(str(FIXTURES / "ib_ndr")))
    data["rdma_core_version"] = "50.0"
    # the fixture's mlx5_3 is down; a healthy host has all four up
    data["devices"][3]["ports"][0].update(state="ACTIVE", phys_state="LinkUp", rate_gbps=400)
    for key, value in changes.items():
        if key == "fw":
            data["devices"][1]["fw_ver"] = value
        elif key == "mtu":
            for dev in data["devices"]:
                dev["ports"][0]["active_mtu"] = value
        else:
            data[key] = value
    return data


def test_identical_hosts_are_consistent():
    report = fabric.consistency({f"n{i}": ndr_host() for i in range(3)})
    assert report["ok"] and report["problems"] == {}
    assert report["rows"]["n0"] == {"rdma_core": "50.0", "ofed": "-", "firmware": "28.39.1002",
                                    "mtu": "4096", "rate_gbps": "400", "link_layer": "InfiniBand",
                                    "ports": "4/4 ACTIVE"}


def test_odd_host_out_is_named_per_column():
    hosts = {"n1": ndr_host(), "n2": ndr_host(), "n3": ndr_host(rdma_core_version="44.0", mtu=2048)}
    report = fabric.consistency(hosts)
    assert not report["ok"] and set(report["problems"]) == {"n3"}
    assert report["problems"]["n3"] == ["rdma_core 44.0 (others: 50.0 on 2 host(s))",
                                        "mtu 2048 (others: 4096 on 2 host(s))"]


def test_mixed_firmware_in_one_host_and_down_port():
    hosts = {"n1": ndr_host(fw="28.37.1014"), "n2": ndr_host(fw="28.37.1014"),
             "n3": sysfs.collect(str(FIXTURES / "ib_ndr")) | {"rdma_core_version": "50.0"}}
    report = fabric.consistency(hosts)
    assert "firmware differs between this host's ports: 28.37.1014,28.39.1002" in \
        report["problems"]["n1"]
    assert report["rows"]["n3"]["ports"] == "3/4 ACTIVE"
    assert "mlx5_3:1 DOWN (not ACTIVE)" in report["problems"]["n3"]


def test_bond_is_not_part_of_the_fabric_and_no_rdma_host_is_flagged():
    bond = sysfs.collect(str(FIXTURES / "roce_bond"))
    row = fabric.host_row(bond)
    assert row["ports"] == "2/2 ACTIVE" and row["firmware"] == "28.39.1002"
    report = fabric.consistency({"a": bond, "b": sysfs.collect("/nonexistent")})
    assert report["problems"]["b"][0].startswith("no RDMA devices: no /sys/class/infiniband_verbs")
    assert "a" not in report["problems"]
