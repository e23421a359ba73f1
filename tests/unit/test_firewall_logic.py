"""firewall's pure logic (plugins/module_utils/netcfg_firewall.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("netcfg_firewall",
                                               ROOT / "plugins/module_utils/netcfg_firewall.py")
fw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fw)


def test_backend_choice():
    assert fw.pick_backend("auto", True, True, True)[0] == "firewalld"
    assert fw.pick_backend("auto", False, True, True)[0] == "ufw"
    assert fw.pick_backend("auto", False, False, True)[0] == "nftables"
    assert fw.pick_backend("auto", False, False, False)[0] is None
    assert fw.pick_backend("ufw", True, False, True)[0] == "ufw"


def test_port_range():
    assert fw.port_range("auto", "32768\t60999") == (32768, 60999)
    assert fw.port_range("40000-41000", "") == (40000, 41000)
    with pytest.raises(ValueError):
        fw.port_range("5-1", "")


def test_subnets_and_control_host():
    nets = fw.normalise_subnets(["10.0.0.5/24", "10.0.0.0/24", "fd00::/64"])
    assert nets == {"ipv4": ["10.0.0.0/24"], "ipv6": ["fd00::/64"]}
    assert fw.control_host_allowed("10.0.0.9", ["10.0.0.0/24"])
    assert not fw.control_host_allowed("10.1.0.9", ["10.0.0.0/24"])


def test_live_hash_and_summary():
    text = 'table inet rdmaprov {\n\tcomment "rdmaprov sha1=' + "a" * 40 + '"\n}'
    assert fw.live_hash(text) == "a" * 40
    assert fw.live_hash("") == ""
    listing = {"nftables": [{"metainfo": {"version": "1.0.6"}},
                            {"table": {"family": "inet", "name": "rdmaprov", "handle": 6}},
                            {"set": {"name": "cluster_ipv4"}},
                            {"chain": {"name": "input", "hook": "input", "policy": "drop"}},
                            {"rule": {"chain": "input"}}, {"rule": {"chain": "input"}}]}
    summary = fw.nft_table_summary(json.dumps(listing))
    assert summary["rules"] == 2 and summary["chains"][0]["policy"] == "drop"
    assert fw.nft_table_summary("") is None


def test_port_specs():
    assert fw.port_specs(["22", "32768-60999"], 4791)[-1] == {"port": "4791", "proto": "udp"}
