# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""Which NCCL environment variables exist, which are deprecated, removed or never existed, and the
one lint of their names (stdlib only: the rdma_facts module, `rdmaprov probe` and `rdmaprov
explain` all call ``name_findings``).

Data, not code, taken from NVIDIA/nccl (fetched 2026-12-03, tags v2.3.7-1 .. v2.30.7-1):
- KNOWN: every ``NCCL_PARAM(..., "X", ...)``, ``DEFINE_NCCL_PARAM(..., NCCL_X, ...)`` and
  ``"NCCL_X"`` string in src/ of the last patch release of each minor version, plus the
  headings of docs/userguide/source/env.rst.
- DEPRECATED / REMOVED: what env.rst says ("deprecated in 2.17", "removed in 2.5", "renamed in
  2.4.0"), and for names env.rst no longer lists, the first release whose src/ no longer reads
  them (NCCL_WORK_FIFO_DEPTH: read by v2.21.5-1, not by v2.22.3-1, which reads
  NCCL_WORK_FIFO_BYTES instead).
- BOGUS: names no NCCL release ever read that people write anyway, with the real switch.
"""

from __future__ import annotations

import difflib
import re

_KNOWN_WORDS = """
AGG_ALLOC_MODE AGG_CHANNEL_SIZE ALGO ALLGATHERV_ENABLE ALLOC_P2P_NET_LL_BUFFERS BOOTSTRAP
BUFFSIZE CGA_CLUSTER_SIZE CHECKS_DISABLE CHECK_MODE CHECK_POINTERS CHUNK_SIZE COLLNET_ENABLE
COLLNET_NODE_THRESHOLD COMM_BLOCKING COMM_ID COMM_PROPERTIES_INITIALIZER
COMM_SHRINK_SHARE_RESOURCES COMM_SPLIT_SHARE_RESOURCES CONF_FILE CONNECT_ROUND_MAX_PEERS
CREATE_THREAD_CONTEXT CROSS_NIC CTA_POLICY CUDA_PATH CUMEM_ENABLE CUMEM_HOST_ENABLE DEBUG
DEBUG_FILE DEBUG_SUBSYS DEBUG_TIMESTAMP_FORMAT DEBUG_TIMESTAMP_LEVELS DEV_API_JIT
DEV_COMM_REQUIREMENTS_INITIALIZER DISABLE_MEM_MANAGER DMABUF_ENABLE ELASTIC_BUFFER_REGISTER
ENABLE_VERSION_CHECK ENV_PLUGIN GDAKI_USE_RELIABLE_DB GDRCOPY_ENABLE GDRCOPY_FIFO_ENABLE
GDRCOPY_FLUSH_ENABLE GDRCOPY_SYNC_ENABLE GDRCOPY_TAIL_ENABLE GDR_FLUSH_DISABLE
GIN_CONNECTION_RAIL GIN_COUNTER_POOL_SIZE GIN_ENABLE GIN_ERROR_QUERY_SEC GIN_EXCLUSIVE_CONTEXTS
GIN_GDAKI_MAX_DEST_RD_ATOMIC GIN_GDAKI_MAX_QP_RD_ATOMIC GIN_GDAKI_NIC_HANDLER GIN_GDAKI_QP_DEPTH
GIN_IB_TC GIN_NCONNECTIONS GIN_NCONTEXTS GIN_PLUGIN GIN_PLUGIN_REF_COUNT GIN_PROXY_QUEUE_SIZE
GIN_SIGNAL_POOL_SIZE GIN_TYPE GRAPH GRAPH_DUMP_FILE GRAPH_DUMP_FILE_RANK GRAPH_FILE
GRAPH_HELPER_DISABLE GRAPH_MIXING_SUPPORT GRAPH_REGISTER GRAPH_STREAM_ORDERING GROUP_CUDA_STREAM
HOSTID IBVERBS_LIB IB_ADAPTIVE_ROUTING IB_ADDR_FAMILY IB_ADDR_RANGE IB_AR_THRESHOLD
IB_CUDA_SUPPORT IB_DATA_DIRECT IB_DEVICE_PCI_ORDER IB_DISABLE IB_ECE_ENABLE IB_FIFO_TC
IB_GDR_LEVEL IB_GID_INDEX IB_HCA IB_MERGE_NICS IB_MERGE_VFS IB_MQP_RETRY_ALL IB_MQP_RETRY_CNT
IB_MQP_RETRY_SLEEP_MSEC IB_OOO_RQ IB_PCI_RELAXED_ORDERING IB_PKEY
IB_PREPOST_RECEIVE_WORK_REQUESTS IB_QPS_PER_CONNECTION IB_QUERY_PORT_SPEED
IB_RECEIVER_SIDE_MATCHING_SCHEME IB_RESILIENCY_PORT_FAILOVER
IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY
IB_RESILIENCY_PORT_RECOVERY IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT
IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL
IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE
IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE
IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX
IB_RESILIENCY_PORT_RECOVERY_START_DELAY IB_RETRY_CNT IB_RETURN_ASYNC_EVENTS IB_ROCE_VERSION_NUM
IB_ROUTABLE_FLID_GID_INDEX IB_SL IB_SPLIT_DATA_ON_QPS IB_SUBNET_AWARE_ROUTING
IB_SUBNET_PREFIX_LEN IB_TC IB_TIMEOUT IB_USE_INLINE IB_WARN_RAIL_LOCAL IGNORE_COLLNET_MISMATCH
IGNORE_CPU_AFFINITY IGNORE_DISABLED_P2P IGNORE_NET_MISMATCH IPC_USE_ABSTRACT_SOCKET
L1_SHARED_MEMORY_CARVEOUT LAUNCH_MODE LAUNCH_ORDER_IMPLICIT LAUNCH_RACE_FATAL
LEGACY_CUDA_REGISTER LL128_BUFFSIZE LL128_C2C LL128_NTHREADS LL_BUFFSIZE LL_THRESHOLD
LOCAL_REGISTER LSA_TEAM_SIZE MAX_CTAS MAX_NCHANNELS MAX_NRINGS MAX_P2P_NCHANNELS MEM_SYNC_DOMAIN
MIN_CTAS MIN_NCHANNELS MIN_NRINGS MIN_P2P_NCHANNELS MLOPART_RDMA_ENABLE MNNVL MNNVL_CLIQUE_ID
MNNVL_CROSS_CLIQUE MNNVL_ENABLE MNNVL_RAIL_PER_HOST MNNVL_SCATTER_NETS_ENABLE MNNVL_UUID
MULTI_RANK_GPU_ENABLE MULTI_SEGMENT_REGISTER NCHANNELS_PER_NET_PEER NET NETDEVS_POLICY
NET_DISABLE_INTRA NET_FORCE_FLUSH NET_FORCE_MERGE NET_GDR_C2C NET_GDR_LEVEL NET_GDR_MLOPART
NET_GDR_READ NET_MERGE_LEVEL NET_MERGE_POLICY NET_OPTIONAL_RECV_COMPLETION NET_OVERHEAD
NET_PLUGIN NET_PLUGIN_REF_COUNT NET_SHARED_BUFFERS NET_SHARED_COMMS NO_CACHE NSOCKS_PERTHREAD
NTHREADS NUM_RMA_CTX NVB_DISABLE NVB_PRECONNECT NVLINK_UTIL_CENTRIC_SCHED_ENABLE
NVLSTREE_MAX_CHUNKSIZE NVLS_CHUNKSIZE NVLS_ENABLE NVLS_NCHANNELS NVTX_DISABLE OOB_NET_ENABLE
OOB_NET_IFNAME P2P_DIRECT_DISABLE P2P_DISABLE P2P_EPOCH_ENABLE P2P_LEVEL P2P_LL_THRESHOLD
P2P_MAX_PEERS P2P_NET_CHUNKSIZE P2P_NVL_CHUNKSIZE P2P_PCI_CHUNKSIZE P2P_PER_CHANNEL_NET_BW
P2P_PXN_LEVEL P2P_READ_ENABLE P2P_SCHEDULE_GROUP_SIZE P2P_USE_CUDA_MEMCPY PAT_ENABLE
PROFILER_PLUGIN PROGRESS_APPENDOP_FREQ PROTO PROXY_APPEND_BATCH_SIZE PROXY_CPUSET
PROXY_DUMP_SIGNAL PROXY_PROFILE PXN_C2C PXN_DISABLE RAS_ADDR RAS_ENABLE RAS_TIMEOUT_FACTOR
REPORT_CONNECT_PROGRESS RINGS RMA_DISABLE RMA_PLUGIN RMA_PLUGIN_REF_COUNT RMA_PROXY_DUMP_SIGNAL
RMA_PROXY_QUEUE_SIZE RUNTIME_CONNECT SET_CPU_STACK_SIZE SET_STACK_SIZE SET_THREAD_NAME
SHADOW_MEMPOOL_MAX_SIZE SHARED_BUFF_COUNT SHM_DISABLE SHM_LOCALITY SHM_MEMCPY_MODE
SHM_USE_CUDA_MEMCPY SINGLE_PROC_MEM_REG_ENABLE SINGLE_RING_THRESHOLD SOCKET_FAMILY SOCKET_IFNAME
SOCKET_INLINE SOCKET_MAGIC SOCKET_MIN_TASKSIZE SOCKET_NTHREADS SOCKET_POLL_TIMEOUT_MSEC
SOCKET_RCVBUF SOCKET_RETRY_CNT SOCKET_RETRY_SLEEP_MSEC SOCKET_SNDBUF SYM_CE_THRESHOLD SYM_CTAS
SYM_GIN_KERNELS_ENABLE SYM_KERNEL SYM_NOWIN_ENABLE SYM_REUSE_SYSMEM_HANDLES
SYM_RS_GIN_CHUNK_SIZE SYM_TMA_ENABLE THREAD_THRESHOLD THREAD_THRESHOLDS TOPO_DUMP_FILE
TOPO_DUMP_FILE_RANK TOPO_FILE TOPO_SPLIT_MLOPART TREE_THRESHOLD TUNER_PLUGIN UID_STAGGER_RATE
UID_STAGGER_THRESHOLD UNPACK_DOUBLE_NCHANNELS USE_CMAKE WARN_ENABLE_DEBUG_INFO WIN_ENABLE
WIN_STRIDE WORK_ARGS_BYTES WORK_FIFO_BYTES WORK_FIFO_DEPTH
"""
KNOWN = frozenset("NCCL_" + n for n in _KNOWN_WORDS.split())

# name -> (since, replacement or None, what NCCL's docs say)
DEPRECATED: dict[str, tuple[str, str | None, str]] = {
    "NCCL_IB_GDR_LEVEL": ("2.4.0", "NCCL_NET_GDR_LEVEL",
                          "renamed to NCCL_NET_GDR_LEVEL in 2.4.0; NCCL no longer reads it"),
    "NCCL_MIN_NRINGS": ("2.17", "NCCL_MIN_CTAS",
                        "old alias of NCCL_MIN_NCHANNELS, which is deprecated since 2.17"),
    "NCCL_MAX_NRINGS": ("2.17", "NCCL_MAX_CTAS",
                        "old alias of NCCL_MAX_NCHANNELS, which is deprecated since 2.17"),
    "NCCL_MIN_NCHANNELS": ("2.17", "NCCL_MIN_CTAS", "deprecated since 2.17"),
    "NCCL_MAX_NCHANNELS": ("2.17", "NCCL_MAX_CTAS", "deprecated since 2.17"),
    "NCCL_CHECK_POINTERS": ("2.29.7", "NCCL_CHECK_MODE=DEBUG_LOCAL", "deprecated since 2.29.7"),
    "NCCL_CHECKS_DISABLE": ("2.2.12", None, "deprecated since 2.2.12"),
}

# name -> (first version that ignores it, replacement or None)
REMOVED: dict[str, tuple[str, str | None]] = {
    "NCCL_SINGLE_RING_THRESHOLD": ("2.3", None),
    "NCCL_IB_CUDA_SUPPORT": ("2.4.0", "NCCL_NET_GDR_LEVEL"),
    "NCCL_LL_THRESHOLD": ("2.5", None),
    "NCCL_TREE_THRESHOLD": ("2.5", None),
    "NCCL_THREAD_THRESHOLD": ("2.5", None),
    "NCCL_RINGS": ("2.5", None),
    "NCCL_SHARED_BUFF_COUNT": ("2.9", None),
    "NCCL_GDRCOPY_TAIL_ENABLE": ("2.12", None),
    "NCCL_AGG_ALLOC_MODE": ("2.13", None),
    "NCCL_AGG_CHANNEL_SIZE": ("2.20", None),
    "NCCL_MNNVL": ("2.21", "NCCL_MNNVL_ENABLE"),
    "NCCL_CUDA_PATH": ("2.21", None),
    "NCCL_WORK_FIFO_DEPTH": ("2.22.3", "NCCL_WORK_FIFO_BYTES"),
    "NCCL_PROXY_PROFILE": ("2.23", None),
}

# Read by someone else than the NCCL library: a container's label, net plugins, nccl-tests.
NOT_NCCL = re.compile(r"^NCCL_(?:VERSION$|UCX_|SHARP_|PLUGIN_P2P$|OFI_|IBEXT_|TESTS?_|HOME$"
                      r"|ROOT$|DIR$|INCLUDE|LIB)")


# Names that NCCL never read, and what does what their author meant.
BOGUS = {
    "NCCL_IB_ENABLE": "NCCL_IB_DISABLE=0 (InfiniBand/RoCE is on unless NCCL_IB_DISABLE=1)",
    "NCCL_IB_ENABLE_RDMA": "NCCL_IB_DISABLE=0 (InfiniBand/RoCE is on unless NCCL_IB_DISABLE=1)",
    "NCCL_IB_ENABLED": "NCCL_IB_DISABLE=0 (InfiniBand/RoCE is on unless NCCL_IB_DISABLE=1)",
    "NCCL_P2P_ENABLE": "NCCL_P2P_DISABLE=0 (P2P is on unless NCCL_P2P_DISABLE=1)",
    "NCCL_SHM_ENABLE": "NCCL_SHM_DISABLE=0 (shared memory is on unless NCCL_SHM_DISABLE=1)",
    "NCCL_NET_GDR_ENABLE": "NCCL_NET_GDR_LEVEL (e.g. SYS to allow GPUDirect RDMA everywhere)",
    "NCCL_GDR_LEVEL": "NCCL_NET_GDR_LEVEL",
    "NCCL_IB_GID": "NCCL_IB_GID_INDEX",
    "NCCL_SOCKET_IFACE": "NCCL_SOCKET_IFNAME",
    "NCCL_IB_HCAS": "NCCL_IB_HCA",
}


def vtuple(v: str | None) -> tuple[int, ...]:
    """'2.22.3' -> (2, 22, 3); '2.5' -> (2, 5); None or junk -> ()."""
    out = []
    for part in (v or "").split("."):
        if not part.isdecimal():
            break
        out.append(int(part))
    return tuple(out)


def _finding(level: str, name: str, message: str, fix: str, code: str) -> dict:
    return {"level": level, "variable": name, "message": message, "fix": fix, "code": code}


def name_findings(env: dict[str, str], version: str | None = None) -> list[dict]:
    """Findings ({level: error|warning|info, variable, message, fix, code}) for the NCCL_* names
    in ``env`` (name -> value): names that never existed, deprecated or removed ones (judged
    against ``version`` when known), and misspellings of real ones. Names NCCL does not read but
    others do (an image's NCCL_VERSION label, net plugins, nccl-tests) are left alone, and so are
    unknown names with no close match: NCCL reads undocumented parameters too."""
    out: list[dict] = []
    have = vtuple(version)
    for name in sorted(env):
        if not name.startswith("NCCL_"):
            continue
        val = env[name]
        if name in BOGUS:
            out.append(_finding("error", name, f"{name} does not exist in NCCL; the real setting "
                                f"is {BOGUS[name]}", f"Set {BOGUS[name]} instead.", "env_bogus"))
        elif name in REMOVED:
            since, repl = REMOVED[name]
            gone = bool(have) and have >= vtuple(since)
            level = "warning" if gone or not have else "info"
            when = (f"NCCL {version} ignores it" if gone else
                    f"still read by NCCL {version}" if have else "check your NCCL version")
            out.append(_finding(level, name, f"{name}={val}: removed in NCCL {since} ({when})",
                                f"Use {repl} instead." if repl else
                                f"Unset it: it has no effect from NCCL {since} on.",
                                "env_removed"))
        elif name in DEPRECATED:
            since, repl, says = DEPRECATED[name]
            if have and have < vtuple(since):
                out.append(_finding("info", name, f"{name}={val}: NCCL {version} reads it; "
                                    f"deprecated from NCCL {since} on",
                                    f"When upgrading, set {repl or 'nothing'} instead.",
                                    "env_deprecated"))
                continue
            out.append(_finding("warning", name, f"{name}={val} is deprecated ({says})",
                                (f"Set {repl} instead" if repl else "Unset it")
                                + (f"; NCCL {version} is the version in this log." if version
                                   else "."), "env_deprecated"))
        elif name not in KNOWN and not NOT_NCCL.match(name):
            near = difflib.get_close_matches(name, sorted(KNOWN), n=1, cutoff=0.85)
            if near:
                out.append(_finding("warning", name, f"{name} is not a variable NCCL reads; did "
                                    f"you mean {near[0]}?", f"NCCL ignores unknown names "
                                    f"silently: rename it to {near[0]}.", "env_unknown"))
    return out
