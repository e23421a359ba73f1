"""`rdmaprov validate --judge DIR` on how other clusters' real logs show their NICs (issue 38).

Which NICs a host's line rate counts, and one NIC per physical port:
- a host whose ``NET/IB : Using`` line a launcher folded into another host's output (Ray prints
  each pod's lines under its own prefix, and a line can land in the other pod's stream): its
  channel lines (``via NET/IB/3``, nccl#302's real log with its Using line taken out, as Ray
  leaves it) are the evidence, never every ACTIVE port;
- a host of a hung run whose log is empty: line rate unknown, never the sum of its ports (a
  front-end Ethernet port included);
- a DGX Spark: one 200 Gb/s cage reached over two PCIe x4 links, so two RDMA devices
  (``rocep1s0f1`` at 0000:01:00.1, ``roceP2p1s0f1`` at 0002:01:00.1) that NCCL lists as two
  NICs. The log lines follow NCCL 2.28.9's format strings (src/transport/net_ib.cc: ``NET/IB:
  [%d] %s:%s:%d/%s provider=%s speed=%d context=%p pciPath=%s ar=%d``, ``NET/IB : Using%s %s;
  OOB %s:%s``; src/transport.cc's channel line); the device layout (four functions, one
  ``sys_image_guid``, node GUIDs base+0/1/4/5) is a Spark's ``ibdev2netdev`` and ``ibv_devinfo``
  as users posted them (the Spark networking guide of the spark-vllm-docker project,
  docs/NETWORKING.md). A healthy Spark pair reaches about 187 Gb/s (23.4 GB/s) of all_reduce
  busbw over one cable: against 25 GB/s it passes, against a 50 GB/s line rate it failed;
- GB200's four single-function rails in four PCI domains (``ibp3s0`` 0000:03:00.0, ``ibP2p3s0``
  0002:03:00.0, ...: NVIDIA's nic-configuration-operator examples) stay four NICs.
The counters files are in the counters script's own shape (plugins/module_utils/rdma_ports.py).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("judge_helpers",
                                               ROOT / "tests" / "cli" / "test_validate_judge.py")
assert _spec and _spec.loader
J = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(J)

NDR_LOG = J.LOGS / "nccl_302_v2.5_modify_qp_einval.log"  # Using 5 HCAs, channels via NET/IB/3


def by_host(doc: dict) -> dict:
    return {h["host"]: h for h in doc["hosts"]}


def test_a_host_whose_using_line_is_elsewhere_counts_its_channels(tmp_path: Path,
                                                                   capsys) -> None:
    """n2's log lost its Using line (it sits in n1's stream): its channels ran on one NIC index,
    so its line rate is one 400 Gb/s port, not its three ACTIVE ones (150 GB/s, which made the
    healthy n1 'below the fabric's best')."""
    text = NDR_LOG.read_text()
    folded = "".join(ln for ln in text.splitlines(keepends=True) if "NET/IB : Using" not in ln)
    assert folded != text and "via NET/IB/3" in folded
    hosts = {"n1": (J.NDR, None), "n2": (J.NDR, None)}
    J.make_run(tmp_path, "fabric", hosts, J.worker_doc(list(hosts), 45.0),
               logs={"n1": text, "n2": folded})
    doc = J.json_report(tmp_path, capsys=capsys)
    by = by_host(doc)
    assert [by[h]["line_rate_GBps"] for h in ("n1", "n2")] == [50.0, 50.0]
    assert by["n2"]["ports"] == "NET/IB/0 of the channels 400 Gb/s"
    assert by["n1"]["passed"] and by["n2"]["passed"], doc
    assert doc["exit_code"] == 0


def test_a_hung_host_with_an_empty_log_has_no_line_rate(tmp_path: Path, capsys) -> None:
    """roce_bond: two 400 GbE rails and a 200 GbE front-end bond, all ACTIVE. An empty log shows
    no NIC: unknown (no 125 GB/s beside its peer's 50)."""
    hosts = {"n1": (J.NDR, NDR_LOG), "n2": (J.SYSFS / "roce_bond", None)}
    J.make_run(tmp_path, "fabric", hosts, None, rcs={"n1": "124", "n2": "124"},
               logs={"n2": ""})
    by = by_host(J.json_report(tmp_path, capsys=capsys))
    assert by["n1"]["line_rate_GBps"] == 50.0
    assert by["n2"]["line_rate_GBps"] is None and not by["n2"]["ports"]
    assert not any("line rate" in r for r in by["n1"]["reasons"] + by["n2"]["reasons"])
    # A run with a document: no bar from a host its log shows no NIC of, and the skip says so.
    ok = tmp_path / "ok"
    J.make_run(ok, "fabric", hosts, J.worker_doc(list(hosts), 45.0), logs={"n2": ""})
    bandwidth = next(c for c in J.json_report(ok, capsys=capsys)["checks"]
                     if c["name"] == "bandwidth")
    assert bandwidth["status"] == "skip" and "no line rate known for n2 (line rate unknown: " \
        "no NIC in its NCCL log" in bandwidth["reason"], bandwidth


# ----- DGX Spark: two PCIe functions of one port ------------------------------------------------

SPARK_GUID = "4cbb:4703:002d:1a16"
SPARK = [  # (device, PCI function, netdev, node GUID, state)
    ("rocep1s0f0", "0000:01:00.0", "enp1s0f0np0", "4cbb:4703:002d:1a16", "DOWN"),
    ("rocep1s0f1", "0000:01:00.1", "enp1s0f1np1", "4cbb:4703:002d:1a17", "ACTIVE"),
    ("roceP2p1s0f0", "0002:01:00.0", "enP2p1s0f0np0", "4cbb:4703:002d:1a1a", "DOWN"),
    ("roceP2p1s0f1", "0002:01:00.1", "enP2p1s0f1np1", "4cbb:4703:002d:1a1b", "ACTIVE"),
]


def counters_doc(rows: list[tuple], rate: int, guid: str | None) -> str:
    ports = []
    for dev, pci, netdev, _node, state in rows:
        entry = {"device": dev, "port": 1, "state": state, "link_layer": "Ethernet",
                 "rate": f"{rate} Gb/sec (4X HDR)", "rate_gbps": rate, "netdev": netdev,
                 "counters": {"out_of_sequence": 0, "packet_seq_err": 0}, "pci": pci,
                 "physfn": None}
        if guid:
            entry["sys_image_guid"] = guid
        ports.append(entry)
    return json.dumps({"ports": ports})


def spark_log(host: str, addr: str, devices: list[tuple[int, str, str]],
              speed: int = 200000) -> str:
    """NCCL 2.28.9's lines for ``devices`` (ibv index, name, pciPath as NCCL prints it)."""
    h = f"{host}:23491:23491 [0] NCCL INFO "
    out = [f"{h}NCCL version 2.28.9+cuda13.0", f"{h}NET/Plugin: Could not find: libnccl-net.so"]
    for i, name, path in devices:
        out.append(f"{h}NET/IB: [{i}] {name}:uverbs{i}:1/RoCE provider=Mlx5 speed={speed} "
                   f"context=0xbca554388f70 pciPath={path} ar=0")
    using = " ".join(f"[{k}]{name}:1/RoCE" for k, (_i, name, _p) in enumerate(devices))
    out += [f"{h}NET/IB : Using {using} [RO]; OOB enp1s0f1np1:{addr}<0>",
            f"{h}Initialized NET plugin IB", f"{h}Assigned NET plugin IB to comm",
            f"{h}Using network IB"]
    for c in range(4):
        out.append(f"{h}Channel {c:02d}/0 : 1[0] -> 0[0] [receive] via NET/IB/{c % len(devices)}")
    return "\n".join(out) + "\n"


SPARK_DEVICES = [(1, "rocep1s0f1", "/sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0"),
                 (3, "roceP2p1s0f1", "/sys/devices/pci0002:00/0002:00:00.0/0002:01:00.0")]


def spark_run(results: Path, guid: str | None, busbw: float, rows: list[tuple] = SPARK) -> None:
    hosts = {"spark-a": (None, None), "spark-b": (None, None)}
    logs = {"spark-a": spark_log("spark-a", "192.168.100.15", SPARK_DEVICES),
            "spark-b": spark_log("spark-b", "192.168.100.16", SPARK_DEVICES)}
    run = J.make_run(results, "fabric", hosts, J.worker_doc(list(hosts), busbw), logs=logs)
    for h in hosts:
        (run / h / "counters_before.json").write_text(counters_doc(rows, 200, guid))


@pytest.mark.parametrize("guid, rows", [
    (SPARK_GUID, SPARK), (None, SPARK),
    (None, [r for r in SPARK if r[4] == "ACTIVE"]),  # a port list of the cabled functions only
], ids=["sys_image_guid", "bus-layout", "names"])
def test_a_spark_port_behind_two_pcie_functions_is_one_nic(tmp_path: Path, capsys,
                                                          guid: str | None,
                                                          rows: list[tuple]) -> None:
    spark_run(tmp_path, guid, 23.4, rows)
    doc = J.json_report(tmp_path, capsys=capsys)
    assert doc["bar"]["GBps"] == pytest.approx(20.0), doc["bar"]
    assert [h["line_rate_GBps"] for h in doc["hosts"]] == [25.0, 25.0]
    assert doc["exit_code"] == 0, doc
    # The same pair at half of it is still a failure: merging is no free pass.
    spark_run(tmp_path / "slow", guid, 11.0, rows)
    assert J.json_report(tmp_path / "slow", capsys=capsys)["exit_code"] == 2


def test_two_ports_of_one_card_stay_two_nics(tmp_path: Path, capsys) -> None:
    """Both cages of the Spark cabled: f0 and f1 are two ports (one sys_image_guid, functions 0
    and 1); each pair of twins is one of them: 2 x 200 Gb/s."""
    rows = [(d, p, n, g, "ACTIVE") for d, p, n, g, _s in SPARK]
    devices = [(0, "rocep1s0f0", "/sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0"),
               (1, "rocep1s0f1", "/sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0"),
               (2, "roceP2p1s0f0", "/sys/devices/pci0002:00/0002:00:00.0/0002:01:00.0"),
               (3, "roceP2p1s0f1", "/sys/devices/pci0002:00/0002:00:00.0/0002:01:00.0")]
    for guid in (SPARK_GUID, None):
        results = tmp_path / str(guid)
        hosts = {"spark-a": (None, None), "spark-b": (None, None)}
        logs = {h: spark_log(h, "10.0.0.1", devices) for h in hosts}
        run = J.make_run(results, "fabric", hosts, J.worker_doc(list(hosts), 45.0), logs=logs)
        for h in hosts:
            (run / h / "counters_before.json").write_text(counters_doc(rows, 200, guid))
        doc = J.json_report(results, capsys=capsys)
        assert [h["line_rate_GBps"] for h in doc["hosts"]] == [50.0, 50.0], guid


def test_gb200_rails_in_four_pci_domains_are_four_nics(tmp_path: Path, capsys) -> None:
    rows = [("ibp3s0", "0000:03:00.0", "ibp3s0", "", "ACTIVE"),
            ("ibP2p3s0", "0002:03:00.0", "ibP2p3s0", "", "ACTIVE"),
            ("ibP16p3s0", "0010:03:00.0", "ibP16p3s0", "", "ACTIVE"),
            ("ibP18p3s0", "0012:03:00.0", "ibP18p3s0", "", "ACTIVE")]
    devices = [(i, name, f"/sys/devices/pci{pci[:4]}:00/{pci[:4]}:00:00.0/{pci}")
               for i, (name, pci, *_rest) in enumerate(rows)]
    hosts = {"gb-a": (None, None), "gb-b": (None, None)}
    logs = {h: spark_log(h, "10.0.0.1", devices, speed=400000) for h in hosts}
    run = J.make_run(tmp_path, "fabric", hosts, J.worker_doc(list(hosts), 180.0), logs=logs)
    for h in hosts:
        (run / h / "counters_before.json").write_text(counters_doc(rows, 400, None))
    doc = J.json_report(tmp_path, capsys=capsys)
    assert [h["line_rate_GBps"] for h in doc["hosts"]] == [200.0, 200.0]
    assert doc["bar"]["GBps"] == pytest.approx(160.0)


# ----- causes NCCL logs at INFO, and the net plugin ---------------------------------------------
# NCCL's own words: src/misc/ibvsymbols.cc logs `Failed to open libibverbs.so[.1]` with INFO
# (2.12 to 2.29); src/net.cc (2.18: "Plugin load (%s) returned %d : %s", "No plugin found, using
# internal implementation"; 2.19-2.22: "No plugin found (%s)", "Plugin load returned %d : %s
# when loading %s", "Using internal network plugin.") and src/plugin/plugin_open.cc (2.23+:
# "Could not find:%s. Using internal network plugin.") say there is no external plugin; the
# HPC-X plugin prints "Plugin Path : ..." and "P2P plugin IBext". The plugin case is
# NVIDIA/nccl#1634 (https://github.com/NVIDIA/nccl/issues/1634): HGX-H100-04 loaded
# /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so, HGX-H100-11 "Could not find:
# libnccl-net.so. Using internal network plugin.", and the 16-rank run hung; the maintainer's
# answer was that libnccl-net.so is on part of the hosts only.

def nccl_lines(host: str, *msgs: str) -> str:
    return "".join(f"{host}:18226:18274 [0] NCCL INFO {m}\n" for m in msgs)


def socket_tail(addr: str) -> tuple[str, ...]:
    return (f"NET/Socket : Using [0]ens49f1np1:{addr}<0>", "Using network Socket")


def test_libibverbs_missing_at_info_is_named_as_the_socket_fallbacks_cause(tmp_path: Path,
                                                                           capsys) -> None:
    good = nccl_lines("n1", "NCCL version 2.25.1+cuda12.4",
                      "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
                      "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>",
                      "Using network IB")
    bad = nccl_lines("n2", "NCCL version 2.25.1+cuda12.4",
                     "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
                     "Failed to open libibverbs.so[.1]", *socket_tail("192.168.30.122"))
    hosts = {"n1": (J.HDR, None), "n2": (J.HDR, None)}
    J.make_run(tmp_path, "fabric", hosts, None, rcs={"n1": "124", "n2": "124"},
               logs={"n1": good, "n2": bad})
    by = by_host(J.json_report(tmp_path, capsys=capsys))
    assert by["n2"]["reasons"][0] == "NCCL fell back to Socket (libibverbs could not be loaded)"
    assert not any("Socket" in r for r in by["n1"]["reasons"])


def test_libibverbs_missing_where_nccl_could_not_go_on_leads(tmp_path: Path, capsys) -> None:
    """A plugin forcing IB (NCCL_NET=gIB): the plugin loads, libibverbs does not (INFO), then
    NCCL's WARN 'Failed to initialize any NET plugin': the INFO line is the cause."""
    log = nccl_lines("n1", "NCCL version 2.27.7+cuda12.9",
                     "NET/Plugin: Loaded net plugin gIB (v11)",
                     "Successfully loaded external network plugin /usr/local/gib/lib64/"
                     "libnccl-net.so", "Failed to open libibverbs.so[.1]")
    log += "n1:18226:18274 [0] plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin\n"
    err = {"ok": False, "error": "DistBackendError: NCCL error: invalid usage", "rank": 0}
    hosts = {"n1": (J.HDR, None), "n2": (J.HDR, J.IB_LOG)}
    J.make_run(tmp_path, "fabric", hosts, err, rcs={"n1": "1", "n2": "1"},
               logs={"n1": log + json.dumps(err) + "\n"})
    by = by_host(J.json_report(tmp_path, capsys=capsys))
    assert by["n1"]["reasons"][0].startswith("Failed to open libibverbs.so[.1]"), by["n1"]


@pytest.mark.parametrize("plugin_lines", [
    ("NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared "
     "object file: No such file or directory",
     "NET/Plugin : No plugin found, using internal implementation"),  # 2.18
    ("NET/Plugin: No plugin found (libnccl-net.so)",
     "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No "
     "such file or directory : when loading libnccl-net.so",
     "NET/Plugin: Using internal network plugin."),  # 2.19-2.22
], ids=["2.18", "2.21"])
def test_no_plugin_found_is_information_never_a_failed_plugin(tmp_path: Path, capsys,
                                                              plugin_lines: tuple) -> None:
    log = nccl_lines("n2", "NCCL version 2.21.5+cuda12.4", *plugin_lines,
                     "NCCL_NET set by environment to Socket", *socket_tail("10.0.0.2"))
    hosts = {"n1": (J.HDR, J.IB_LOG), "n2": (J.HDR, None)}
    J.make_run(tmp_path, "fabric", hosts, J.worker_doc(list(hosts), 1.0), logs={"n2": log})
    by = by_host(J.json_report(tmp_path, capsys=capsys))
    text = " ".join(by["n2"]["reasons"] + by["n2"]["warnings"])
    assert "NCCL fell back to Socket" in text
    assert "plugin failed" not in text and "network plugin" not in text, text


def test_a_net_plugin_on_some_hosts_only_is_named(tmp_path: Path, capsys) -> None:
    hpcx = nccl_lines("HGX-H100-04", "NCCL version 2.21.5+cuda12.4",
                      "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v6 (v6)",
                      "Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
                      "P2P plugin IBext",
                      "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB bond0:10.0.0.4<0>",
                      "Using network IBext")
    internal = nccl_lines("HGX-H100-11", "NCCL version 2.21.5+cuda12.4",
                          "NET/Plugin: Could not find: libnccl-net.so. Using internal network "
                          "plugin.", "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB bond0:10.0.0.11<0>",
                          "Using network IB")
    hosts = {"n04": (J.HDR, None), "n05": (J.HDR, None), "n11": (J.HDR, None)}
    J.make_run(tmp_path, "fabric", hosts, None, rcs={h: "124" for h in hosts},
               logs={"n04": hpcx, "n05": hpcx.replace("HGX-H100-04", "HGX-H100-05"),
                     "n11": internal})
    by = by_host(J.json_report(tmp_path, capsys=capsys))
    lead = by["n11"]["reasons"][0]
    assert lead.startswith("net plugin differs across hosts: no external net plugin"), lead
    assert "the external net plugin NCCL RDMA Plugin v6 (v6) on n04, n05" in lead
    for h in ("n04", "n05"):
        assert by[h]["reasons"][0].startswith("worker hung"), by[h]
        assert any("on n11" in w for w in by[h]["warnings"]), by[h]
    # Every host alike: nothing said.
    same = tmp_path / "same"
    J.make_run(same, "fabric", {"a": (J.HDR, None), "b": (J.HDR, None)}, None,
               rcs={"a": "124", "b": "124"}, logs={"a": internal, "b": internal})
    doc = J.json_report(same, capsys=capsys)
    assert not any("net plugin" in t for h in doc["hosts"]
                   for t in h["reasons"] + h["warnings"])


def test_without_a_counters_file_the_rates_are_nccls_own(tmp_path: Path, capsys) -> None:
    """No counters file came back (copied logs only): NCCL 2.27+'s per-device lines give the
    devices and speeds, and the persistent names (rocep1s0f1, roceP2p1s0f1: function 1 of a
    multi-function device in two PCI domains) the one port."""
    hosts = {"spark-a": (None, None), "spark-b": (None, None)}
    logs = {h: spark_log(h, "192.168.100.15", SPARK_DEVICES) for h in hosts}
    J.make_run(tmp_path, "fabric", hosts, J.worker_doc(list(hosts), 23.4), logs=logs)
    doc = J.json_report(tmp_path, capsys=capsys)
    assert [h["line_rate_GBps"] for h in doc["hosts"]] == [25.0, 25.0]
    assert doc["bar"]["GBps"] == pytest.approx(20.0) and doc["exit_code"] == 0, doc["bar"]
    slow = tmp_path / "slow"
    J.make_run(slow, "fabric", hosts, J.worker_doc(list(hosts), 11.0), logs=logs)
    assert J.json_report(slow, capsys=capsys)["exit_code"] == 2


def test_fewer_nics_in_a_hosts_channels_is_no_port_fault(tmp_path: Path, capsys) -> None:
    """Both hosts' NCCL list the same five HCAs; n2's log shows its channels on two of them (one
    more channel line in nccl#302's format), n1's on one: n1 is seen on fewer NICs, each as
    fast, which is not a port trained down (it failed 'below the fabric's best' before)."""
    text = NDR_LOG.read_text()
    line = next(ln for ln in text.splitlines(keepends=True) if "via NET/IB/3" in ln)
    more = text + line.replace("Ring 01", "Ring 02").replace("NET/IB/3", "NET/IB/2")
    hosts = {"n1": (J.NDR, None), "n2": (J.NDR, None)}
    J.make_run(tmp_path, "fabric", hosts, J.worker_doc(list(hosts), 45.0),
               logs={"n1": text, "n2": more})
    doc = J.json_report(tmp_path, capsys=capsys)
    by = by_host(doc)
    assert [by[h]["line_rate_GBps"] for h in ("n1", "n2")] == [50.0, 100.0]
    assert by["n1"]["passed"] and by["n2"]["passed"], doc
    assert doc["bar"]["GBps"] == pytest.approx(40.0)
    # The same with n1's port trained down to HDR: that is a fault, and named.
    down = J.trained_down(tmp_path, "ib_ndr", "mlx5_2", "200 Gb/sec (4X HDR)")
    slow = tmp_path / "down"
    J.make_run(slow, "fabric", {"n1": (down, None), "n2": (J.NDR, None)},
               J.worker_doc(list(hosts), 45.0), logs={"n1": text, "n2": more})
    n1 = by_host(J.json_report(slow, capsys=capsys))["n1"]
    assert not n1["passed"] and "a port trained down or missing?" in n1["reasons"][0], n1
