"""`rdmaprov explain FILE` names the cause and the fix (issue 41), run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
ROOT = Path(__file__).resolve().parents[2]


def explain(*files: Path) -> list[dict[str, Any]]:
    """One `rdmaprov explain --json` run over the files (a list even for one)."""
    p = subprocess.run([sys.executable, "-m", "rdmaprov", "explain", "--json",
                        *map(str, files)], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, check=False)
    assert p.returncode in (0, 2), p.stderr
    doc = json.loads(p.stdout)
    return doc if isinstance(doc, list) else [doc]


def text(report: dict[str, Any]) -> str:
    return " ".join(f["message"] + " " + (f["hint"] or "") for f in report["findings"])


# A launcher's or collector's prefix in front of every line, as pasted from each.
PREFIXES = {
    "torchrun": "[rank0]:",
    "srun": "0: ",
    "mpirun": "[1,0]<stdout>:",
    "k8s": "2025-07-21T19:05:29.123456789Z ",
    "ray": "(RayWorkerWrapper pid=27907, ip=10.0.0.2) ",
    "ray_task": "(pid=4242) ",
    "timestamp": "[2025-07-21 19:05:29] ",
}


def test_libibverbs_cause_whatever_the_level_and_prefix(tmp_path: Path) -> None:
    real = (FIX / "nccl_1653_info_no_libibverbs_socket.log").read_text(encoding="utf-8")
    # NCCL up to 2.18 logged the same line at WARN from misc/ibvwrap.cc (NVIDIA/nccl#367).
    warn = real.replace("NCCL INFO Failed to open", "misc/ibvwrap.cc:63 NCCL WARN Failed to open")
    assert warn != real
    files = []
    for name, prefix in PREFIXES.items():
        for level, body in (("info", real), ("warn", warn)):
            f = tmp_path / f"{name}_{level}.log"
            f.write_text("".join(prefix + line + "\n" for line in body.splitlines()))
            files.append(f)
    reports = explain(*files)
    for f, r in zip(files, reports, strict=True):
        assert r["network"] == "Socket", f.name
        assert r["fallback_cause"] == "libibverbs could not be loaded", f.name
        assert "Install rdma-core" in text(r), f.name


def test_nvls_bind_out_of_memory_is_multicast_exhaustion_not_fabric_manager() -> None:
    [r] = explain(FIX / "nccl_2077_v2.29.7_nvls_mc_exhausted.log")
    nvls = [f for f in r["findings"] if f.get("code") == "nvls_failure"]
    assert len(nvls) == 1
    assert "multicast objects exhausted" in nvls[0]["message"]
    assert "NCCL_NVLS_ENABLE=0" in nvls[0]["hint"] and "fewer communicators" in nvls[0]["hint"]
    # NCCL's own sentence blames the Fabric Manager; the diagnosis does not repeat it.
    assert "systemctl status nvidia-fabricmanager" not in text(r)
    assert "configuration error in the Fabric Manager" not in text(r)


def test_nvls_bind_other_cuda_error_still_points_at_fabric_manager() -> None:
    [r] = explain(FIX / "pytorch177472_nvls_v2.29_bind_401.log")
    assert "Fabric Manager" in text(r) and "exhausted" not in text(r)


def _magic(data: bytes) -> str:
    """NCCL's "%lx" of the first 8 bytes it read (socket.cc: a uint64_t, little-endian)."""
    return f"{int.from_bytes(data[:8], 'little'):x}"


def test_wrong_magic_names_what_connected(tmp_path: Path) -> None:
    # No public paste with an HTTP peer was found: these lines are NCCL's own format strings
    # (socket.cc "wrong magic %lx != %lx" 2.16-2.26, "socket magic mismatch (peer 0x%016llx
    # != expected 0x%016llx)" 2.27+) filled with the first bytes each client sends.
    expected = "134eccad5a34ad33"
    old = "h1:367:372 [0] misc/socket.cc:432 NCCL WARN socketFinalizeAccept: wrong magic {} != {}"
    new = ("h1:367:372 [0] NCCL INFO socketFinalizeAccept from 10.1.2.3<51234>: socket magic "
           "mismatch (peer 0x{:0>16} != expected 0x{:0>16}), discarding peer connection")
    cases = {
        "get_old": (old.format(_magic(b"GET /metrics HTTP/1.1"), expected), "HTTP request"),
        "head_new": (new.format(_magic(b"HEAD / HTTP/1.1"), expected), "HTTP request"),
        "post_ray": ("(RayWorkerWrapper pid=9, ip=10.0.0.2) "
                     + old.format(_magic(b"POST /api"), expected), "HTTP request"),
        "tls": (old.format(_magic(b"\x16\x03\x01\x02\x00\x01\x00\x01"), expected), "TLS"),
        "nccl": (old.format("ba8657f4d3a5a02a", expected), "another NCCL job"),
    }
    files = []
    for name, (line, _) in cases.items():
        f = tmp_path / f"{name}.log"
        f.write_text(line + "\n")
        files.append(f)
    for (name, (_, want)), r in zip(cases.items(), explain(*files), strict=True):
        stray = [f for f in r["findings"] if f.get("code") == "stray_connection"]
        assert len(stray) == 1, name
        assert want in stray[0]["message"], name
        if want != "HTTP request":
            assert "HTTP request" not in stray[0]["message"], name
    assert "10.1.2.3<51234>" in explain(files[1])[0]["findings"][0]["message"]
    assert "'GET /met'" in explain(files[0])[0]["findings"][0]["message"]


def test_known_nccl_bug_says_fixed_in_and_harmless_warn_is_not_a_cause() -> None:
    smem, userbuff = explain(FIX / "nccl_tinygrad29_v2.25.1_rtx5090_smem.log",
                             FIX / "nccl_1684_v2.25.1_ipc_userbuff_harmless.log")
    [bug] = [f for f in smem["findings"] if f.get("code") == "nccl_known_bug"]
    assert bug["severity"] == "error" and "82240" in bug["message"]
    assert "fixed in NCCL 2.26.2" in bug["hint"] and "upgrade" in bug["hint"]
    [ub] = [f for f in userbuff["findings"] if f.get("code") == "userbuff_register_harmless"]
    assert ub["severity"] == "info" and "harmless" in ub["message"]
    # The stuck watchdog stays the error; the registration WARN is not made its cause.
    assert {f["code"] for f in userbuff["findings"] if f["severity"] == "error"} == {
        "watchdog_stuck"}


def test_watchdog_desync_names_the_ranks_and_ops() -> None:
    [r] = explain(FIX / "nccl_1409_torch_watchdog_desync.log")
    [d] = [f for f in r["findings"] if f.get("code") == "watchdog_desync"]
    assert d["severity"] == "error"
    assert "rank 3 ran ALLREDUCE, rank 7 ran BROADCAST at SeqNum 80078" in d["message"]
    assert "TORCH_NCCL_DESYNC_DEBUG=1" in d["hint"]


def _journal(host: str, when: str, state: str) -> str:
    """The real cubecos#733 journal line (mlx5 'Link up'), for another host, second and state."""
    real = (FIX / "kernel_cubecos733_journal_link_flap.txt").read_text().splitlines()[1]
    assert real.startswith("Mar 27 15:37:34 cc1 kernel: mlx5_core") and real.endswith("Link up")
    return real.replace(" cc1 ", f" {host} ").replace("15:37:34", when).replace(
        "Link up", f"Link {state}")


def test_link_down_on_several_hosts_in_one_second_is_the_shared_part(tmp_path: Path) -> None:
    # No public paste of a multi-host journal was found: the real line, for three hosts.
    hosts = ("cc1", "cc2", "cc3")
    shared = tmp_path / "shared.txt"
    shared.write_text("\n".join([_journal(h, "15:37:34", "down") for h in hosts]
                                + [_journal(h, "15:39:02", "up") for h in hosts]) + "\n")
    apart = tmp_path / "apart.txt"
    apart.write_text("\n".join([_journal("cc1", "15:37:34", "down"),
                                _journal("cc2", "15:52:10", "down")]) + "\n")
    r, a = explain(shared, apart)
    [s] = [f for f in r["findings"] if f.get("code") == "link_down_shared"]
    assert "3 hosts in the same second (Mar 27 15:37:34)" in s["message"]
    assert "switch" in s["message"] and "not each host's cable" in s["message"]
    assert not any(f.get("code") in ("link_flap", "link_down") for f in r["findings"])
    assert set(r["links"]) == {"cc1 eth1", "cc2 eth1", "cc3 eth1"}
    # Different seconds: each host's own link, never the shared part.
    assert not any(f.get("code") == "link_down_shared" for f in a["findings"])
    assert {f["code"] for f in a["findings"] if f.get("code")} == {"link_down"}


def test_perftest_resource_failures_name_their_cause(tmp_path: Path) -> None:
    qp, huge = explain(FIX / "perftest139_irdma_inline_create_qp.txt",
                       FIX / "perftest395_hugepages_mr_per_qp.txt")
    [q] = [f for f in qp["findings"] if f.get("code") == "perftest_qp_inline"]
    assert "E810/irdma" in q["message"] and "-I 0" in q["hint"]
    [h] = [f for f in huge["findings"] if f.get("code") == "perftest_hugepages"]
    assert "vm.nr_hugepages" in h["hint"] and "kernel.shmmni" in h["hint"]
    # Without the hugepage lines, "Couldn't allocate MR" is the locked-memory limit, with the
    # command that tells (lines of zrlio/softiwarp#23's paste).
    mr = tmp_path / "mr.txt"
    mr.write_text("Couldn't allocate MR\nfailed to create mr\nFailed to create MR\n")
    [r] = explain(mr)
    [m] = [f for f in r["findings"] if f.get("code") == "perftest_mr"]
    assert "locked-memory limit" in m["message"] and "`ulimit -l`" in m["hint"]


def test_nccl_tests_gpu_busy_is_exclusive_process_mode(tmp_path: Path) -> None:
    # NVIDIA/nccl-tests#369 (GH200 in Exclusive Process mode); the paste's last line is cut in
    # the thread after "'CUDA-capable": completed with CUDA's own text for error 46.
    text = "\n".join([
        "# nccl-tests version 2.17.8 nccl-headers=22606 nccl-library=22606",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        "#  Rank  0 Group  0 Pid 3617715 on    gpu-1-1 device  0 [0009:01:00] NVIDIA GH200 120GB",
        "#  Rank  1 Group  0 Pid 3617716 on    gpu-1-1 device  1 [0019:01:00] NVIDIA GH200 120GB",
        "gpu-1-1: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy or "
        "unavailable'"]) + "\n"
    f = tmp_path / "busy.txt"
    f.write_text(text)
    [r] = explain(f)
    assert r["kind"] == "nccl_tests"
    [b] = [x for x in r["findings"] if x.get("code") == "tests_gpu_busy"]
    assert "on gpu-1-1" in b["message"] and "Exclusive Process" in b["message"]
    assert "nvidia-smi -c DEFAULT" in b["hint"]


def test_ib_counters_saturated_and_errors() -> None:
    sat, quiet, one = explain(FIX / "ibqueryerrors_linuxrdma2021_saturated.txt",
                              FIX / "perfquery_diags16_extended_zero.txt",
                              FIX / "ibqueryerrors_ucx9590_port_all.txt")
    assert sat["kind"] == quiet["kind"] == one["kind"] == "ib_counters"
    [s] = [f for f in sat["findings"] if f.get("code") == "ib_counter_saturated"]
    assert '"MF0;ys23ib4:SX6036/U1" 0x2c903006e29b0 port 5 SymbolErrorCounter = 65535' in (
        s["message"])
    assert "perfquery -x -R" in s["hint"] and "read it again" in s["hint"]
    # 16-bit counters below their maximum and 64-bit sums are counts, never "saturated".
    assert "PortXmitDiscards = 649" not in s["message"]
    assert not any(f.get("code") == "ib_counter_saturated" for f in one["findings"])
    assert [f["severity"] for f in quiet["findings"]] == ["info"]


def test_ibportstate_width_down(tmp_path: Path) -> None:
    real = (FIX / "ibportstate_exadata2_4x_qdr.txt").read_text()
    # The real paste with the local port trained at 1X (the first LinkWidthActive line).
    down = tmp_path / "down.txt"
    down.write_text(real.replace("LinkWidthActive:.................4X",
                                 "LinkWidthActive:.................1X", 1))
    ok, bad = explain(FIX / "ibportstate_exadata2_4x_qdr.txt", down)
    assert not any(f["severity"] == "error" for f in ok["findings"])
    [w] = [f for f in bad["findings"] if f.get("code") == "ib_link_width_down"]
    assert "active 1X, both ends enabled for 4X" in w["message"] and "mlxlink" in w["hint"]
    assert not any(f.get("code") == "ib_link_speed_down" for f in bad["findings"])
