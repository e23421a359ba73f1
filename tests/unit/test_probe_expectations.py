"""`probe INVENTORY --write-expectations`: the class and majority rule (rdmaprov/probe/
expectations.py) on rdma facts read from the fixture trees by the collector the probe runs, and
the written files read back through check's own loader (rdmaprov/check/expect.py)."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml

from rdmaprov import collection
from rdmaprov.check import expect
from rdmaprov.errors import UserError
from rdmaprov.probe import expectations

FIXTURES = Path(__file__).resolve().parents[2] / "tests/fixtures/sysfs"
sysfs = collection.rdma_sysfs


def ndr(**changes) -> dict:
    """The ib_ndr tree's facts (4 NDR HCAs, mlx5_3 DOWN in the fixture) with all four up."""
    data = copy.deepcopy(sysfs.collect(str(FIXTURES / "ib_ndr")))
    data["devices"][3]["ports"][0].update(state="ACTIVE", phys_state="LinkUp", rate_gbps=400)
    if "rate" in changes:
        data["devices"][2]["ports"][0]["rate_gbps"] = changes["rate"]
    if "fw" in changes:
        data["devices"][1]["fw_ver"] = changes["fw"]
    if changes.get("down"):
        data["devices"][3]["ports"][0].update(state="DOWN", phys_state="Disabled")
    return data


def test_identical_hosts_make_one_class_with_what_they_have():
    derived = expectations.derive({f"n{i}": ndr() for i in range(3)})
    assert list(derived["classes"]) == ["infiniband-mt4129"]
    cls = derived["classes"]["infiniband-mt4129"]
    assert cls["hosts"] == ["n0", "n1", "n2"]
    assert cls["expect"] == {"link_layer": "InfiniBand", "ports": 4, "rate": 400, "mtu": 4092,
                             "firmware": {"MT_0000000838": "28.39.1002"}}
    assert cls["firmware"] == "28.39.1002"
    assert derived["differs"] == {} and derived["unclassified"] == {}


def test_odd_hosts_are_named_not_folded_in():
    derived = expectations.derive({"n1": ndr(), "n2": ndr(), "n3": ndr(), "n4": ndr(down=True),
                                   "n5": ndr(rate=200, fw="28.37.1014")})
    cls = derived["classes"]["infiniband-mt4129"]
    assert cls["expect"]["ports"] == 4 and cls["expect"]["rate"] == 400  # the majority's
    assert derived["hosts"]["n4"] == "infiniband-mt4129"  # still its class: one card fewer up
    assert derived["differs"] == {
        "n4": ["ports 3 (class infiniband-mt4129: 4 on 4 of 5 hosts)"],
        "n5": ["rate 200 (class infiniband-mt4129: 400 on 4 of 5 hosts)",
               "firmware 28.37.1014,28.39.1002 (class infiniband-mt4129: 28.39.1002 on 4 of 5 "
               "hosts)"]}


def test_classes_by_hardware_and_hosts_without_rdma():
    roce = sysfs.collect(str(FIXTURES / "roce"))
    derived = expectations.derive({"ib1": ndr(), "eth1": roce, "eth2": copy.deepcopy(roce),
                                   "cpu1": sysfs.collect(str(FIXTURES / "no_devices"))})
    assert sorted(derived["classes"]) == ["ethernet-mt4125", "infiniband-mt4129"]
    eth = derived["classes"]["ethernet-mt4125"]["expect"]
    assert eth["link_layer"] == "Ethernet" and eth["rate"] == 100 and eth["mtu"] == 9000
    assert derived["hosts"]["eth2"] == "ethernet-mt4125"
    assert list(derived["unclassified"]) == ["cpu1"]
    assert derived["unclassified"]["cpu1"].startswith("no RDMA port")


def test_a_tie_takes_the_stricter_value():
    derived = expectations.derive({"a": ndr(), "b": ndr(rate=200)})
    assert derived["classes"]["infiniband-mt4129"]["expect"]["rate"] == 400
    assert list(derived["differs"]) == ["b"]


def test_written_files_load_through_checks_loader(tmp_path: Path):
    derived = expectations.derive({"n1": ndr(), "n2": ndr(), "n3": ndr(down=True)})
    written = expectations.write(tmp_path / "exp", derived, "inv.ini")
    assert [p.name for p in written] == ["infiniband-mt4129.yml", "hosts.yml"]
    loaded = expect.load_file(written[0])
    assert loaded == {"link_layer": "InfiniBand", "ports": 4, "rate": 400, "mtu": 4092,
                      "firmware": {"MT_0000000838": "28.39.1002"}}
    text = written[0].read_text()
    assert "#   n1\n#   n2\n#   n3\n" in text
    assert "differ from this (named in hosts.yml): n3" in text
    index = yaml.safe_load(written[1].read_text())
    assert index["hosts"] == {h: "infiniband-mt4129.yml" for h in ("n1", "n2", "n3")}
    assert index["differs"] == {"n3": ["ports 3 (class infiniband-mt4129: 4 on 2 of 3 hosts)"]}
    assert not [p for p in (tmp_path / "exp").iterdir() if p.name.startswith(".")]  # no temp


def test_bad_directories_are_one_line_errors(tmp_path: Path):
    afile = tmp_path / "f"
    afile.write_text("")
    with pytest.raises(UserError, match="not a directory"):
        expectations.check_dir(afile)
    with pytest.raises(UserError, match="f is not a directory"):
        expectations.check_dir(afile / "sub")
    expectations.check_dir(tmp_path / "new" / "deeper")  # made when written
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(UserError, match="not writable"):
            expectations.check_dir(ro)


def with_gpus(data: dict, count: int, on_pci: int) -> dict:
    data = copy.deepcopy(data)
    data["gpus"] = {"count": count, "on_pci": on_pci, "models": ["NVIDIA H100"] * bool(count)}
    return data


def test_gpus_split_classes_and_a_count_nobody_showed_is_not_written():
    derived = expectations.derive({"g1": with_gpus(ndr(), 8, 8), "g2": with_gpus(ndr(), 8, 8),
                                   "g3": with_gpus(ndr(), 7, 8), "c1": with_gpus(ndr(), 0, 0)})
    assert derived["hosts"] == {"g1": "infiniband-mt4129-gpu", "g2": "infiniband-mt4129-gpu",
                                "g3": "infiniband-mt4129-gpu", "c1": "infiniband-mt4129"}
    assert derived["classes"]["infiniband-mt4129-gpu"]["expect"]["gpus"] == 8
    assert derived["classes"]["infiniband-mt4129"]["expect"]["gpus"] == 0
    assert derived["differs"] == {
        "g3": ["gpus 7 (class infiniband-mt4129-gpu: 8 on 2 of 3 hosts)"]}
    # Probed before the driver was loaded: GPUs on PCI, none shown: no count to expect.
    derived = expectations.derive({"g1": with_gpus(ndr(), 0, 8), "g2": with_gpus(ndr(), 0, 8)})
    cls = derived["classes"]["infiniband-mt4129-gpu"]
    assert "gpus" not in cls["expect"] and derived["differs"] == {}
    assert cls["left_out"] == ["gpus: GPUs on PCI but the driver showed none on most hosts"]


def test_ports_without_netdev_write_no_mtu_and_say_why():
    data = ndr()
    for dev in data["devices"]:
        for port in dev["ports"]:
            port.update(netdev=None, netdev_mtu=None, path_mtu={})
    cls = expectations.derive({"a": data, "b": copy.deepcopy(data)})["classes"]["infiniband-mt4129"]
    assert "mtu" not in cls["expect"]
    assert cls["left_out"] == ["mtu: the RDMA ports have no netdev (no IPoIB): check has no MTU "
                               "to compare"]
