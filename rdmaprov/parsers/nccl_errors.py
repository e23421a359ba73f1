"""What an NCCL error means: the explanation table for each error NcclLogParser collects (the
rules table's cause when it states one, else the error's own class), and PyTorch's watchdog
timeouts, and the error record itself (NcclError). Split from nccl_log.py, which reads the
lines; this file says what they are and mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rdmaprov.parsers import rules
from rdmaprov.parsers._common import Finding


@dataclass
class NcclError:
    kind: str
    line: str
    count: int = 1
    status: int | None = None
    vendor_err: int | None = None
    verb: str | None = None
    errno_text: str | None = None
    errno: int | None = None
    qp_state: str | None = None  # the state a failed ibv_modify_qp tried to reach (RTR, RTS)
    gid_index: int | None = None
    local_gid: str | None = None
    peer: str | None = None  # the address at the other end of a failed socket
    detail: str | None = None  # NCCL's "Last error:" text under a PyTorch error
    host: str | None = None  # where it was first seen
    rank: int | None = None
    returned: int | None = None  # the ncclResult_t the WARN's own call returned ("x.cc:12 -> 2")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "line": self.line, "count": self.count}
        for k in ("status", "vendor_err", "verb", "errno_text", "errno", "qp_state",
                  "gid_index", "local_gid", "peer", "detail", "host", "rank", "returned"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.status is not None:
            d["status_text"] = rules.WC_STATUS.get(self.status)
        return d


def explain_error(e: NcclError, env: dict[str, str], consequence: bool = False) -> Finding:
    times = f" (x{e.count})" if e.count > 1 else ""
    hit = rules.match(e.line, "nccl")
    if hit is not None:  # the rules table states this cause
        d = rules.diagnosis(*hit, e.line)
        # NCCL's own NVLS text blames the Fabric Manager; not when the slots ran out.
        says = (f"; NCCL says: {e.detail}" if e.detail and e.kind == "nvls_failure"
                and "exhausted" not in d.cause else "")
        return Finding(d.severity, d.cause + times + says, d.action, d.code, d.remedy)
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if e.kind == "no_interface":
        return Finding(
            "error", "NCCL found no network interface for its bootstrap"
            + (f": NCCL_SOCKET_IFNAME={ifname} matches no interface with an address here"
               if ifname else "") + times,
            ("Check the name with `ip -br addr` on every host (and inside the container: "
             "without host networking it only has eth0 and lo); set NCCL_SOCKET_IFNAME to an "
             "interface that exists, with an address, on all hosts, or a prefix (ens, ^lo)."
             if ifname else
             "The process sees no usable interface (only lo, or none with an address): run "
             "the container with --network=host or give it a network, or set "
             "NCCL_SOCKET_IFNAME to an interface that has an address."))
    if e.kind == "address_family":
        return Finding(
            "error", "NCCL could not open a socket: address family not supported" + times,
            "NCCL picked an interface of a family the process cannot use (an IPv6-only or "
            "addressless interface, typically a container without networking): run with "
            "--network=host, set NCCL_SOCKET_IFNAME to an interface with an IPv4 address, "
            "and NCCL_SOCKET_FAMILY=AF_INET if the hosts mix IPv4 and IPv6.")
    comm_id = env.get("NCCL_COMM_ID")
    if e.kind == "subnet":
        return Finding(
            "error", "no local interface is in the subnet of the rendezvous address"
            + (f" {e.peer}" if e.peer else "")
            + (f" (NCCL_COMM_ID={comm_id})" if comm_id else "") + times,
            "The address in NCCL_COMM_ID (or MASTER_ADDR) is not reachable from any "
            "interface of this process: inside a bridged container it sees only the bridge "
            "subnet. Use host networking, or an address of the rank-0 host that this host "
            "routes to, with NCCL_SOCKET_IFNAME naming the interface on that subnet.")
    if e.kind == "bind_address":
        return Finding(
            "error", "NCCL could not bind its bootstrap socket: Cannot assign requested "
            "address" + (f" (NCCL_COMM_ID={comm_id})" if comm_id else "") + times,
            "The rendezvous address (NCCL_COMM_ID or MASTER_ADDR) is not an address of the "
            "host or container that binds it: set it to the rank-0 host's own address as "
            "that process sees it (with --network=host inside containers).")
    if e.kind == "async_event":
        return Finding(
            "error", "the NIC reported an asynchronous error: " + e.line[-120:] + times,
            "'local access violation work queue error' after an NCCL upgrade was traced to "
            "hosts with different MTUs (NVIDIA/nccl#1524: 2.20 stopped taking the smaller of "
            "the two path MTUs): compare active_mtu in ibv_devinfo and the netdev MTU on "
            "every host and switch port, and make them equal.")
    if e.kind == "peer_lost" and consequence:
        return Finding(
            "warning", "a peer closed the connection after the error above (a consequence): "
            + e.line[-120:] + times,
            "The other side gave up because of the earlier error on this path: fix that one.",
            "consequence")
    if e.kind == "peer_lost":
        return Finding(
            "error", "a peer closed the connection"
            + (f" ({e.peer})" if e.peer else "") + ": " + e.line[-120:] + times,
            "The process at the other end exited or crashed, or the network between the "
            "hosts dropped: read that host's log for its first error (often a segfault, an "
            "OOM kill or an earlier NCCL WARN), and check the link if it is still alive.")
    if e.kind == "remote_error":
        return Finding(
            "error", "ncclRemoteError: a remote process exited or the network failed" + times
            + (f"; NCCL's last error: {e.detail}" if e.detail else ""),
            "This rank only saw the other side go away. The cause is on the peer or the "
            "path: find the first rank whose log shows an error or a crash; the 'Last "
            "error' line names the transport that noticed it.")
    if e.kind == "completion":
        what = rules.WC_STATUS.get(e.status or -1, "error")
        msg = (f"work completion error status {e.status} ({what})"
               + (f", vendor err {e.vendor_err}" if e.vendor_err is not None else "") + times)
        if e.status == 12:
            hint = ("The NIC retried a send until it gave up: the peer was unreachable over "
                    "the fabric. Check the path between the two hosts (link flaps, switch "
                    "ports, ibdiagnet), on RoCE the GID index (a RoCE v2 IPv4 GID on both "
                    "ends), routing between subnets and PFC/ECN; vendor err 129 is the mlx5 "
                    "code for that retry exhaustion.")
        elif e.status == 13:
            hint = ("The receiver had no buffer posted in time: usually the peer process died "
                    "or hung.")
        elif e.status == 5:
            hint = "Flushed after an earlier error on the same QP: look for the first error."
            if e.vendor_err == 249:
                hint += (" With no earlier error, vendor err 249 was traced to PCIe ACS left "
                         "enabled or to platform (BIOS) firmware (NVIDIA/nccl#1353): check "
                         "both.")
        elif e.status == 4:
            # sjeaugey on NVIDIA/nccl#928: "IB error 4 is usually due to ACS being enabled and
            # breaking GPU Direct RDMA"; NCCL_NET_GDR_LEVEL=0 confirms it.
            hint = ("The NIC could not access the buffer (local protection). With GPU Direct "
                    "RDMA this is usually PCIe ACS enabled on the bridges between GPU and NIC, "
                    "redirecting peer-to-peer traffic: confirm with NCCL_NET_GDR_LEVEL=LOC "
                    "(GDR off; if the error goes away it is the PCIe path), then disable ACS "
                    "(BIOS, or setpci on the PCIe switches; in a VM enable ATS). Also check "
                    "that nvidia_peermem is loaded or DMA-BUF is available.")
        elif e.status == 10:
            hint = "A memory key or access right did not match: often GDR/peer-memory trouble."
        else:
            hint = "Check the fabric path and the peer process at the time of the error."
        return Finding("error", msg, hint)
    if e.kind == "ibv_call":
        msg = f"{e.verb} failed" + (f": {e.errno_text}" if e.errno_text else "") + times
        err = (e.errno_text or "").lower()
        if e.verb == "ibv_modify_qp":
            to = f" (to {e.qp_state})" if e.qp_state else ""
            gid = (f", local GID index {e.gid_index}" if e.gid_index is not None else "") + (
                f" ({e.local_gid})" if e.local_gid else "")
            msg = f"{e.verb}{to} failed" + (f": {e.errno_text}" if e.errno_text else "") \
                + gid + times
            code = "qp_" + ("link_local_gid" if (e.local_gid or "").lower().startswith("fe80")
                            else "unreachable" if "unreachable" in err
                            else "timeout" if "timed out" in err
                            else "no_device" if "no such device" in err else "setup")
            if (e.local_gid or "").lower().startswith("fe80"):
                hint = (f"GID index {e.gid_index} is a link-local (fe80::) GID, which is not "
                        "routed between hosts: set NCCL_IB_GID_INDEX to the RoCE v2 GID of "
                        "the port's IPv4 address (show_gids; the same index on every host).")
            elif "unreachable" in err:
                hint = ("No route from the RoCE port to the peer's GID: the two ports are in "
                        "different subnets without a route on the RoCE netdev. Add the "
                        "routes (ip route on each RoCE interface), or on a rail-only fabric "
                        "keep NCCL on matching rails with NCCL_CROSS_NIC=0.")
            elif "timed out" in err:
                hint = ("The peer port never answered the connection: on rail-optimized or "
                        "rail-only fabrics NICs of different rails cannot reach each other, "
                        "so set NCCL_CROSS_NIC=0 (NVIDIA/nccl#2013); otherwise check that "
                        "both hosts use the same NCCL_IB_GID_INDEX (a routable RoCE v2 GID), "
                        "the route between the subnets and the MTU end to end.")
            elif "no such device" in err:
                hint = ("The GID index names no usable GID on this port, or the port's "
                        "netdev is not in this network namespace (macvlan/SR-IOV containers: "
                        "NVIDIA/nccl#925): pick NCCL_IB_GID_INDEX from show_gids inside the "
                        "container.")
            elif "invalid argument" in err:
                hint = ("Connecting the queue pair failed: usually a wrong NCCL_IB_GID_INDEX "
                        "(on RoCE pick the RoCE v2 IPv4 GID from show_gids, same on all "
                        "hosts), no route between the two ports' subnets, or a path MTU "
                        "larger than the port's.")
            else:
                hint = "Queue pair setup failed: check NCCL_IB_GID_INDEX, MTU and the fabric path."
            return Finding("error", msg, hint, code)
        if e.verb == "ibv_open_device":
            code = "verbs_open_device"
            hint = ("The HCA is listed (sysfs) but its verbs device cannot be opened: in a "
                    "container /dev/infiniband is not mapped (docker --device=/dev/infiniband, "
                    "Kubernetes an rdma/... resource from the RDMA device plugin) or the "
                    "process lacks permission on /dev/infiniband/uverbs*.")
        elif e.verb in ("ibv_reg_mr", "ibv_reg_mr_iova2", "ibv_create_cq", "ibv_create_qp",
                        "ibv_reg_dmabuf_mr"):
            code = "verbs_memlock"
            hint = ("Usually the locked-memory limit: `ulimit -l` must be unlimited where NCCL "
                    "runs (limits.conf, systemd LimitMEMLOCK, docker --ulimit memlock=-1, "
                    "mpirun/slurm propagate it).")
        else:
            code = "verbs_call"
            hint = "A verbs call failed: check the device state (ibv_devinfo) and permissions."
        return Finding("error", msg, hint, code)
    if e.kind == "memory_registration":
        return Finding("error", "registering memory with the NIC failed" + times,
                       "Raise the locked-memory limit (ulimit -l unlimited) where the ranks run.")
    if e.kind == "no_libibverbs":
        return Finding("warning", "libibverbs.so could not be loaded" + times,
                       "Without libibverbs NCCL cannot use InfiniBand/RoCE; install rdma-core.")
    if e.kind == "timeout":
        return Finding("error", "a collective timed out" + times,
                       "One rank stopped progressing: look for the first NCCL WARN on any "
                       "rank before the timeout (a network error, a dead process); a "
                       "slow/failing link shows as retry-exceeded completion errors.")
    if e.kind == "cuda_error":
        return Finding("error", "NCCL 'unhandled cuda error'" + times,
                       "A CUDA call inside NCCL failed: the NCCL WARN or 'Last error' line "
                       "names it (NVLS/Fabric Manager, an invalid device, a driver too old "
                       "for the CUDA runtime); without one rerun with NCCL_DEBUG=INFO.")
    if e.kind == "system_error":
        return Finding("error", "NCCL 'unhandled system error'" + times,
                       "A system or verbs call failed; rerun with NCCL_DEBUG=INFO and read the "
                       "NCCL WARN line before it (often memlock, a wrong interface or GID).")
    if e.kind == "plugin" and "UNDELIVERABLE" in e.line:
        return Finding("error", "net plugin error: " + e.line[-160:] + times,
                       "The libfabric provider could not deliver to the peer: the peer process "
                       "is gone or the path to it is blocked; read the peer's log and test the "
                       "path between the two instances.")
    if e.kind == "plugin":
        return Finding("error", "net plugin error: " + e.line[-160:] + times,
                       "The external network plugin (e.g. aws-ofi-nccl) failed: check its "
                       "version against libfabric and that the devices are visible in the "
                       "container.")
    if e.kind == "duplicate_gpu":
        return Finding("error", "two ranks use the same GPU (Duplicate GPU detected)" + times,
                       "Each local rank needs its own device: torch.cuda.set_device(LOCAL_RANK) "
                       "before init, or a CUDA_VISIBLE_DEVICES per rank.")
    if e.kind == "comm_abort":
        return Finding("warning", "NCCL aborted the communicator after an error (a "
                       "consequence): " + e.line[-120:] + times,
                       "Act on the error that made NCCL abort: the other findings name it.",
                       "consequence")
    if e.kind == "proxy":
        return Finding("warning", "proxy thread error (a consequence): " + e.line[-120:] + times,
                       "The proxy reports an earlier failure on this rank: act on the first "
                       "error above it.")
    if e.kind == "socket":
        return Finding("error", "socket/bootstrap error: " + e.line[-160:] + times,
                       "Check NCCL_SOCKET_IFNAME picks the same routable interface on every "
                       "host and that no firewall blocks the ports.")
    if e.kind == "nccl_error":
        return Finding("error", "NCCL error: " + e.line[-160:] + times
                       + (f"; NCCL's last error: {e.detail}" if e.detail else ""),
                       "The NCCL WARN or 'Last error' text before it says why; the other "
                       "findings explain it. Without one, rerun with NCCL_DEBUG=INFO.")
    if e.returned in NCCL_RESULT:
        # An unlisted WARN whose call then failed: NCCL's own line is the reason.
        return Finding("error", f"an NCCL call failed ({NCCL_RESULT[e.returned]}) after this "
                       "warning: " + e.line[-160:] + times,
                       "The WARN line is NCCL's own reason for the failure; the lines after it "
                       "(-> N) trace the failed call up to the API. Errors reported later by "
                       "other ranks are usually its consequences.", "nccl_error")
    return Finding("warning", "NCCL warning: " + e.line[-160:] + times, None)


# ncclResult_t (nccl.h): what "file.cc:123 -> N" lines return; 7 (ncclInProgress) is not a
# failure.
NCCL_RESULT = {1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
               4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError"}


def _ranks(ks: list[int]) -> str:
    return ", ".join(str(k) for k in ks[:16]) + (" ..." if len(ks) > 16 else "")


def watchdog_findings(wd: dict[str, Any]) -> list[Finding]:
    f: list[Finding] = []
    if wd["watchdog_stuck"]:
        f.append(Finding(
            "error", "PyTorch's NCCL watchdog itself hung on rank(s) "
            + ", ".join(str(k) for k in wd["watchdog_stuck"][:32]),
            "A NCCL or CUDA call blocked the watchdog thread there (PyTorch's own message): "
            "those ranks are stuck inside a call rather than waiting for peers; take their "
            "stacks (py-spy dump --native) before raising TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC.",
            "watchdog_stuck"))
    n = wd["count"]
    if not n:
        return f
    shown = ", ".join(str(k) for k in wd["ranks_timed_out"][:16]) + (" ..." if n > 16 else "")
    first = wd["first"]
    f.append(Finding(
        "error", f"{n} rank(s) hit the watchdog timeout"
        + (f" on {wd['op']}" if wd["op"] != "?" else "") + f" at SeqNum {wd['seq']} "
        f"(ranks {shown}); first to report: rank {first['rank']}"
        + (f" at {first['time']}" if first["time"] else ""),
        "Every rank waiting in a collective times out together; the rank that caused it is "
        "the one that did not reach the collective (crashed, stuck in data loading, or on a "
        "different code path) or the first one with a network error. Look for a rank that "
        "is missing from these reports or is behind.", "watchdog"))
    if wd.get("desync"):
        ds = wd["desync"]
        parts = [f"rank{'s' if len(ks) > 1 else ''} {_ranks(ks)} ran {what}"
                 for what, ks in ds["by"].items()]
        f.append(Finding(
            "error", "collective desync: " + ", ".join(parts) + f" at SeqNum {ds['seq']}"
            + (f" (process group {ds['pg']})" if ds["pg"] is not None else ""),
            "The ranks called different collectives (or different sizes) at the same point, so "
            "each waits for a partner that never comes: a code path that differs per rank (a "
            "rank-dependent branch, an extra step or evaluation on some ranks, uneven data at "
            "an epoch end). Not a network fault. Rerun with TORCH_NCCL_DESYNC_DEBUG=1, or "
            "PyTorch's flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1), to see the call each rank made.",
            "watchdog_desync"))
    if wd["silent_ranks"]:
        f.append(Finding(
            "warning", "ranks seen in this text but with no timeout report: "
            + ", ".join(str(k) for k in wd["silent_ranks"][:32]),
            "Read those ranks' logs first: a rank that never entered the collective does not "
            "time out in it (or died before its watchdog fired).", "watchdog_silent"))
    if wd.get("behind"):
        f.append(Finding(
            "warning", "rank(s) " + ", ".join(str(k) for k in wd["behind"])
            + f" are behind: last completed NCCL work {wd['behind_last_completed']}, "
            "lower than the other ranks",
            "The lagging rank is the one to examine (its stack: py-spy dump, or "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1 for PyTorch's flight recorder).", "watchdog_behind"))
    return f
