"""mlnx_qos lossless check (TOS = DSCP<<2) and show_gids index choice, on real outputs."""

from __future__ import annotations

from pathlib import Path

from rdmaprov.parsers.mlnx_qos import parse_mlnx_qos
from rdmaprov.parsers.nccl_tests import NcclTestsParser, verdict
from rdmaprov.parsers.show_gids import ShowGidsParser

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "explain"


def _lines(name: str) -> list[str]:
    return (FIX / name).read_text().splitlines(keepends=True)


def _feed(parser, lines):
    for line in lines:
        parser.feed(line)
    return parser.finish()


def test_nccl_ib_tc_106_is_not_lossless_when_prio3_has_no_pfc() -> None:
    # DSCP 26 -> priority 3 in this map; PFC is on 0,2,6,7 only.
    r = parse_mlnx_qos(_lines("mlnx_qos_mellanox_doc2792.txt"), ib_tc=106)
    assert r.lossless == {"nccl_ib_tc": 106, "assumed_default": False, "dscp": 26,
                          "priority": 3, "ready": False,
                          "why": "DSCP 26 maps to priority 3, PFC off there"}
    assert r.findings[-1].severity == "error"


def test_tc_on_a_pfc_priority_is_lossless() -> None:
    # TOS 72 -> DSCP 18 -> priority 2, which has PFC.
    r = parse_mlnx_qos(_lines("mlnx_qos_mellanox_doc2792.txt"), ib_tc=72)
    assert r.lossless["priority"] == 2 and r.lossless["ready"] is True


def test_no_map_means_cannot_tell() -> None:
    r = parse_mlnx_qos(_lines("mlnx_qos_mellanox_doc2792_pfc3.txt"), ib_tc=106)
    assert r.lossless["ready"] is None


def test_trust_pcp_is_flagged() -> None:
    r = parse_mlnx_qos(["Priority trust state: pcp\n", "PFC configuration:\n",
                        "priority 0 1 2 3 4 5 6 7\n", "enabled 0 0 0 1 0 0 0 0\n"], ib_tc=106)
    assert r.trust == "pcp" and r.lossless["ready"] is False
    assert any("trust mode is pcp" in f.message for f in r.findings)


def test_devices_disagreeing_on_gid_index() -> None:
    r = _feed(ShowGidsParser(), [
        "mlx5_0  1  3  0000:0000:0000:0000:0000:ffff:0a00:0001 10.0.0.1  v2  ens1\n",
        "mlx5_1  1  5  0000:0000:0000:0000:0000:ffff:0a00:0101 10.0.1.1  v2  ens2\n"])
    assert r.gid_index == {"mlx5_0:1": 3, "mlx5_1:1": 5}
    assert any("disagree" in f.message for f in r.findings)


def test_line_rate_verdict() -> None:
    t = _feed(NcclTestsParser(), _lines("nccl_tests_252_ring_new.txt"))
    # 4 x 200G NICs: 0.8 x 100 GB/s = 80 GB/s, measured peak 97.54.
    assert verdict(t, None, 200, nics=4, fraction=0.8)["pass"] is True
    t = _feed(NcclTestsParser(), _lines("nccl_tests_252_ring_new.txt"))
    v = verdict(t, None, 400, nics=4, fraction=0.8)
    assert v["pass"] is False and v["expected_busbw"] == 160.0
    assert t.findings[-1].severity == "error"
