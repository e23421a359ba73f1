"""perftest, kernel log, ethtool -S and nvidia-smi topo -m parsers on lines in the shapes their
sources print (perftest src/, kernel drivers/net/ethernet/mellanox/mlx5/core, mlx5 counters.rst,
nvidia-smi); the real pastes are in tests/fixtures/explain."""

from __future__ import annotations

from rdmaprov.explain import Options, detect, explain_stream


def codes(report: dict) -> list[str]:
    return [f.get("code") for f in report["findings"]]


def test_kernel_health_syndrome_and_command_errors() -> None:
    lines = [
        "[  445.937186] mlx5_core 0000:0d:00.0: poll_health:801:(pid 0): device's health "
        "compromised - reached miss count",
        "[  445.937212] mlx5_core 0000:0d:00.0: print_health_info:431:(pid 0): Health issue "
        "observed, firmware internal error, severity(3) ERROR:",
        "[  445.937314] mlx5_core 0000:0d:00.0: print_health_info:447:(pid 0): synd 0x1: "
        "firmware internal error",
        "[ 1021.1] mlx5_core 0000:3b:00.0: mlx5_cmd_out_err:838:(pid 1234): CREATE_MKEY(0x200) "
        "op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x1a3d2), err(-22)",
        "[ 1030.2] mlx5_core 0000:3b:00.0: mlx5_pcie_event:299:(pid 0): Detected insufficient "
        "power on the PCIe slot (27W).",
        "[ 1040.3] mlx5_core 0000:3b:00.0 ens1f0np0: Link down",
    ]
    r = explain_stream(lines)
    assert r["kind"] == "kernel_log"
    c = [d["code"] for d in r["diagnoses"]]
    # The first error (the health counter) leads; the command failure is a warning after it.
    assert c[0] == "mlx5_health" and "mlx5_cmd_error" in c and "pcie_power" in c
    cmd = next(d for d in r["diagnoses"] if d["code"] == "mlx5_cmd_error")
    assert "CREATE_MKEY" in cmd["cause"] and "bad parameter" in cmd["cause"] \
        and "0x1a3d2" in cmd["cause"]
    assert "link_down" in codes(r)


def test_kernel_single_boot_link_up_is_quiet() -> None:
    r = explain_stream(["[    9.1] mlx5_core 0000:3b:00.0 ens1f0np0: Link up"])
    assert r["kind"] == "kernel_log"
    assert all(f["severity"] == "info" for f in r["findings"])


def test_ethtool_pause_on_the_wrong_priority_and_drops() -> None:
    lines = ["NIC statistics:", "     rx_prio0_pause: 120", "     tx_prio0_pause: 0",
             "     rx_prio3_pause: 4000", "     tx_prio3_pause: 10",
             "     rx_prio3_buf_discard: 7", "     rx_discards_phy: 3",
             "     np_cnp_sent: 0", "     rx_pause_ctrl_phy: 0"]
    r = explain_stream(lines)
    assert r["kind"] == "ethtool_stats" and r["pause_priorities"] == [0, 3]
    c = codes(r)
    assert {"pfc_wrong_priority", "lossless_drops", "port_discards", "no_ecn"} <= set(c)
    wrong = next(f for f in r["findings"] if f.get("code") == "pfc_wrong_priority")
    assert "priority 0" in wrong["message"] and wrong["remedy"] == "config"
    # Another lossless priority chosen by the operator.
    r4 = explain_stream(lines, Options(lossless_prio=0))
    assert "priority 3" in next(f["message"] for f in r4["findings"]
                                if f.get("code") == "pfc_wrong_priority")


def test_topo_gpu_whose_nearest_nic_is_sys_away() -> None:
    lines = ["\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
             "GPU0\t X \tSYS\tPIX\t0-31\t0\t\tN/A",
             "GPU1\tSYS\t X \tSYS\t32-63\t1\t\tN/A",
             "NIC0\tPIX\tSYS\t X ",
             "", "NIC Legend:", "", "  NIC0: mlx5_0"]
    r = explain_stream(lines)
    assert r["kind"] == "nvidia_topo"
    assert r["gpus"][0]["nearest_nic"] == ["mlx5_0"] and r["gpus"][1]["nic_path"] == "SYS"
    far = next(f for f in r["findings"] if f.get("code") == "topo_nic_far")
    assert "GPU1" in far["message"] and "GPU0" not in far["message"]


def test_perftest_line_rate_verdict_and_qp_failure() -> None:
    head = [" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
            " 65536      5000             11732.16            11730.13            0.187682"]
    slow = explain_stream(["                    RDMA_Write BW Test", *head],
                          Options(line_rate_gbps=200))
    assert slow["bw_avg_gbps"] == 93.84 and slow["verdict"]["pass"] is False
    ok = explain_stream(["                    RDMA_Write BW Test", *head],
                        Options(line_rate_gbps=100))
    assert ok["verdict"]["pass"] is True
    qp = explain_stream([" Link type       : Ethernet", " GID index       : 0",
                         "Failed to modify QP 18 to RTR", "Unable to Connect the HCA's through "
                         "the link"])
    assert qp["kind"] == "perftest" and qp["diagnoses"][0]["code"] == "perftest_qp_rtr"
    assert "GID index" in qp["findings"][0]["hint"]


def test_detection_keeps_nccl_logs_nccl() -> None:
    assert detect(["h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
                   "h:1:2 [0] NCCL INFO Using network IB"]) == "nccl_log"


def test_kernel_lines_of_older_and_newer_drivers() -> None:
    lines = [
        "[  12.1] mlx5_core 0000:08:00.0: mlx5_cmd_check:772:(pid 123): SET_ROCE_ADDRESS(0x761) "
        "op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x1f7a8b)",
        "mlx5_core 0000:3b:00.0: wait_func:1152:(pid 123): DESTROY_QP(0x501) timeout. Will "
        "cause a leak of a command resource",
        "mlx5_core 0000:3b:00.0 ens1f0np0: TX timeout on queue: 3, SQ: 0x10a, CQ: 0x4b2",
        "pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:3b:00.0",
        "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.",
    ]
    r = explain_stream(lines)
    got = {d["code"]: d for d in r["diagnoses"]}
    assert "SET_ROCE_ADDRESS" in got["mlx5_cmd_error"]["cause"]
    assert got["mlx5_cmd_timeout"]["remedy"] == "reboot"
    assert got["tx_timeout"]["cause"].startswith("ens1f0np0: transmit queue 3")
    assert got["pcie_aer"]["remedy"] == "replace"
    assert got["gpu_xid"]["cause"] == "GPU Xid 79 on 0000:18:00"


def test_ethtool_other_drivers_priority_and_global_pause() -> None:
    bnxt = ["NIC statistics:", "     rx_pfc_ena_frames_pri3: 10", "     rx_pfc_ena_frames_pri5: 4",
            "     tx_pause_frames: 2"]
    r = explain_stream(bnxt)
    assert r["kind"] == "ethtool_stats" and r["pause_priorities"] == [3, 5]
    assert {"pfc_wrong_priority", "global_pause"} <= set(codes(r))
    ice = ["NIC statistics:", "     rx_priority_3_xoff.nic: 7", "     tx_priority_3_xoff.nic: 1"]
    r = explain_stream(ice)
    assert r["pause_priorities"] == [3] and "pfc_wrong_priority" not in codes(r)
