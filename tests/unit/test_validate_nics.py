"""The NICs a host's channels ran on, and SR-IOV functions counted once per wire.

Line formats: NCCL's src/transport/net_ib.cc (``NET/IB : Using [%d]%s:%d/%s``, ``NET/IB : Made
virtual device [%d] name=%s speed=%d ndevs=%d``) and src/transport.cc / net.cc (``Channel
%02d/%d : %d[%x] -> %d[%x] [send] via NET/%s/%d%s%s``, with ``(%d)`` the proxy rank under PXN).
The Using line and the channel lines of the first test are real (NVIDIA/nccl#302, node17-2 of
sglang#4289 in tests/fixtures/explain/index.yaml); the merged-device lines follow the format
string of nccl's net_ib.cc (NCCL 2.19+, NCCL_IB_MERGE_NICS).
"""

from __future__ import annotations

from pathlib import Path

from rdmaprov.validate import verdict as V
from rdmaprov.validate.nics import channel_devices

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "explain"


def test_channels_of_a_real_log_name_one_of_five_hcas() -> None:
    text = (LOGS / "nccl_302_v2.5_modify_qp_einval.log").read_text().splitlines()
    assert channel_devices(text) == {"mlx5_2"}


def test_channels_without_a_using_list_are_unknown() -> None:
    """sglang#4289's excerpt shows channels via NET/IB/0 and /2 but no Using line: unknown,
    so the caller keeps NCCL's list or every port."""
    text = (LOGS / "nccl_sglang4289_gdrdma.log").read_text().splitlines()
    assert channel_devices(text) is None


def test_pxn_and_merged_virtual_devices() -> None:
    lines = [
        "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
        "[3]mlx5_3:1/IB [RO]; OOB ib0:10.0.0.1<0>",
        "h:1:1 [0] NCCL INFO NET/IB : Made virtual device [0] name=mlx5_0+mlx5_1 speed=800000 "
        "ndevs=2",
        "h:1:1 [0] NCCL INFO NET/IB : Made virtual device [1] name=mlx5_2+mlx5_3 speed=800000 "
        "ndevs=2",
        "h:1:1 [0] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [send] via NET/IB/0(8)/GDRDMA",
    ]
    assert channel_devices(lines) == {"mlx5_0", "mlx5_1"}
    assert channel_devices(lines[:1] + lines[3:]) == {"mlx5_0"}  # no vdevs: physical index


def test_socket_channels_name_no_hca() -> None:
    assert channel_devices(["h:1:1 [0] NCCL INFO Channel 03/0 : 0[0] -> 1[0] [send] via "
                            "NET/Socket/3"]) is None


def _facts(ports: list[dict]) -> dict:
    devs: dict[str, list] = {}
    for p in ports:
        devs.setdefault(p["device"], []).append({**p, "state": "ACTIVE"})
    return {"rdma": {"devices": [{"name": n, "ports": ps} for n, ps in devs.items()]}}


def test_vfs_of_one_port_count_once() -> None:
    """Two VFs of one ConnectX port (each its own RDMA device, physfn the PF) and the PF: one
    200 Gb/s wire, not three."""
    f = _facts([
        {"device": "mlx5_0", "port": 1, "rate_gbps": 200, "pci": "0000:3b:00.0"},
        {"device": "mlx5_2", "port": 1, "rate_gbps": 200, "pci": "0000:3b:00.2",
         "physfn": "0000:3b:00.0"},
        {"device": "mlx5_3", "port": 1, "rate_gbps": 200, "pci": "0000:3b:00.3",
         "physfn": "0000:3b:00.0"},
        {"device": "mlx5_1", "port": 1, "rate_gbps": 200, "pci": "0000:86:00.0"},
    ])
    assert V.line_rate_GBps(f, used={"mlx5_0", "mlx5_2", "mlx5_3"}) == 25.0
    assert V.line_rate_GBps(f, used={"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}) == 50.0


def test_vf_netdevs_without_pci_facts_count_once() -> None:
    """ibdev2netdev of openshift/sriov-network-operator#635: mlx5_2 ==> ibp75s0, VFs
    ibp75s0v0..."""
    f = _facts([{"device": "mlx5_2", "port": 1, "rate_gbps": 400, "netdev": "ibp75s0"},
                {"device": "mlx5_12", "port": 1, "rate_gbps": 400, "netdev": "ibp75s0v0"},
                {"device": "mlx5_13", "port": 1, "rate_gbps": 400, "netdev": "ibp75s0v1"},
                {"device": "mlx5_3", "port": 1, "rate_gbps": 400, "netdev": "ibp84s0"}])
    assert V.line_rate_GBps(f, used={"mlx5_2", "mlx5_12", "mlx5_13", "mlx5_3"}) == 100.0


def test_speeds_from_nccls_own_lines_when_no_port_list_came_back() -> None:
    """2.27+ prints each device with its speed (Mb/s); 2.24-2.26 only the virtual devices
    (net_ib.cc's format strings): either gives the ports a run without a counters file had."""
    from rdmaprov.validate.nics import read_log

    h = "h:1:1 [0] NCCL INFO "
    new = read_log([f"{h}NET/IB: [1] rocep1s0f1:uverbs1:1/RoCE provider=Mlx5 speed=200000 "
                    "context=0xbca554388f70 pciPath=/sys/devices/pci0000:00/0000:00:00.0/"
                    "0000:01:00.0 ar=0"])
    assert new.speeds == {("rocep1s0f1", 1): ("RoCE", 200.0)}
    old = read_log([
        f"{h}NET/IB : Made virtual device [0] name=mlx5_0 speed=400000 ndevs=1",
        f"{h}NET/IB : Made virtual device [1] name=mlx5_2+mlx5_3 speed=800000 ndevs=2",
        f"{h}NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; "
        "OOB ib0:10.0.0.1<0>",
        f"{h}Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA"])
    assert old.channels == {"mlx5_2", "mlx5_3"}
    assert V.line_rate_GBps(old.facts(), used=old.channels) == 100.0
    assert {d for d, _p in old.speeds} == {"mlx5_0", "mlx5_2", "mlx5_3"}
