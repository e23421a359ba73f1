"""Port listings in their verbose shapes (the real pastes are in tests/fixtures/explain)."""

from __future__ import annotations

import pytest

from rdmaprov.explain import explain_stream


@pytest.mark.parametrize(("line", "device", "state", "netdev", "pci"), [
    # a Lustre host: the LNet network follows the netdev state
    ("0000:b8:00.1 mlx5_13 (MT4123 - MCX653106A-ECAT) ConnectX-6 VPI adapter card, 100Gb/s "
     "(HDR100, EDR IB and 100GbE), dual-port QSFP56 fw 20.26.4012 port 1 (ACTIVE) ==> ib4 (Up) "
     "(o2ib)", "mlx5_13", "ACTIVE", "ib4", "0000:b8:00.1"),
    # mlx4 rows have no PCI address
    ("mlx4_0 (mt26428 - MT1037X01146) KESTREL        QDR             fw 2.9.1000 port 1 "
     "(ACTIVE) ==> ib0 (Up)", "mlx4_0", "ACTIVE", "ib0", None),
])
def test_ibdev2netdev_verbose_rows(line: str, device: str, state: str, netdev: str,
                                   pci: str | None) -> None:
    r = explain_stream([line])
    assert r["kind"] == "ibdev2netdev"
    p = r["ports"][0]
    assert (p["device"], p["state"], p["netdev"], p.get("pci")) == (device, state, netdev, pci)


def test_ibdev2netdev_plain_rows_keep_the_port_state_unknown() -> None:
    r = explain_stream(["mlx5_0 port 1 ==> ens1f0np0 (Up)"])
    assert r["ports"][0]["state"] is None and "firmware" not in r["ports"][0]
