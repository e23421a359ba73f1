"""The diagnosis rules: one table of (pattern, cause, what to do, remediation class, source).

Every rule names the stable finding code it fires, the text it matches, what that text means
(``cause``), what to do (``action``), the remediation class shared with ``check`` and
``validate`` (rdmaprov.remediation.Remedy) and the public source that established it. Causes
and actions may use the pattern's groups as ``{0}``, ``{1}`` ...

``diagnose(lines)`` runs the table over any text (a kernel log, a perftest run, an NCCL log, a
host's validation output) and returns one ``Diagnosis`` per cause, the first error first:
rules marked ``consequence`` (a peer giving up, an abort after the error) come after the
causes whatever their order in the text. ``match(line, scope)`` is the one-line form the
streaming parsers call on the few lines they already know to be errors.

Scopes: ``nccl`` (NCCL WARN text and PyTorch's "Last error"), ``kernel`` (dmesg, journalctl
-k), ``perftest`` (ib_write_bw and friends). ``diagnose`` without a scope tries them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rdmaprov.parsers._common import Finding, clean
from rdmaprov.parsers.nccl_releases import FIXES, fixed_text
from rdmaprov.remediation import Remedy

# ibv_wc_status values (verbs.h) as NCCL ("status=N", "with error N") and perftest ("Failed
# status N") print them.
WC_STATUS = {
    1: "local length error", 2: "local QP operation error", 4: "local protection error",
    5: "work request flushed", 9: "remote invalid request", 10: "remote access error",
    11: "remote operation error", 12: "transport retry counter exceeded",
    13: "RNR retry counter exceeded",
}


@dataclass(frozen=True)
class Rule:
    code: str
    scope: str  # nccl | kernel | perftest
    pattern: re.Pattern[str]
    severity: str
    cause: str
    action: str
    remedy: Remedy
    source: str
    consequence: bool = False
    needle: str = ""  # a lower-case substring every match contains (a cheap pre-test)


def _r(code: str, scope: str, pattern: str, severity: str, cause: str, action: str,
       remedy: Remedy, source: str, consequence: bool = False, needle: str = "") -> Rule:
    return Rule(code, scope, re.compile(pattern, re.I), severity, cause, action, remedy, source,
                consequence, needle.lower())


C, R, L, B, F, V = (Remedy.CONFIG, Remedy.REPLACE, Remedy.RESET_LINK, Remedy.REBOOT,
                    Remedy.FIRMWARE, Remedy.INVESTIGATE)

_SHM_ACTION = (
    "A container's /dev/shm is 64 MB by default: run it with --shm-size=1g or more, or "
    "--ipc=host (Kubernetes: an emptyDir with medium: Memory mounted at /dev/shm); check "
    "`df -h /dev/shm` and remove stale /dev/shm/nccl-* files of killed jobs. "
    "NCCL_SHM_DISABLE=1 works around it (intra-host traffic then goes through P2P or the "
    "network).")

# Order matters inside a scope: the first matching rule names a line.
RULES: tuple[Rule, ...] = (
    # ---- NCCL -------------------------------------------------------------------------------
    # ibv_event_type_str() names (rdma-core libibverbs/verbs.c); NCCL prints them in
    # "NET/IB : mlx5_0:1 Got async event : <name>" (net_ib.cc) and, from 2.19, "async fatal
    # event on QP ...: <name>".
    _r("async_event", "nccl", r"async (?:(?:non-)?fatal )?event.*local access violation",
       "error", "the NIC reported a local access violation on a work queue (async event)",
       "'local access violation work queue error' after an NCCL upgrade was traced to hosts "
       "with different MTUs (NVIDIA/nccl#1524: 2.20 stopped taking the smaller of the two "
       "path MTUs): compare active_mtu in ibv_devinfo and the netdev MTU on every host and "
       "switch port, and make them equal.", C,
       "https://github.com/NVIDIA/nccl/issues/1524", needle="async"),
    _r("async_event", "nccl", r"async (?:(?:non-)?fatal )?event\b.*\bport error",
       "error", "the HCA port went down under NCCL (async event 'port error'): a flapping "
       "link (the link flapped or dropped) or a failing HCA port",
       "A port error is the link itself going down, not a setting: look for 'Link down' of "
       "that port in the kernel log (dmesg -T | grep -i link), check the cable/transceiver "
       "and the switch port's error counters, and reset or reseat the link; a port that "
       "keeps flapping needs its cable or optic replaced.", L,
       "https://github.com/linux-rdma/rdma-core/blob/master/libibverbs/verbs.c",
       needle="port error"),
    _r("async_event", "nccl", r"async (?:(?:non-)?fatal )?event\b.*\b(local catastrophic error|"
       r"local work queue catastrophic error)",
       "error", "the HCA reported a {0} (async event): a failing HCA (the adapter or its "
       "firmware failed)",
       "A catastrophic error is the adapter failing, not a setting: read the kernel log for "
       "mlx5_core health messages (health compromised, firmware internal error, syndrome), "
       "reboot the host to reset the device, and if it recurs update the firmware or "
       "replace the HCA.", B,
       "https://github.com/linux-rdma/rdma-core/blob/master/libibverbs/verbs.c",
       needle="catastrophic"),
    _r("async_info", "nccl", r"async (?:non-fatal )?event\b.*\b(port active|client "
       r"reregistration|GID table change|LID change|SM change|PKey change)",
       "info", "the NIC reported '{0}' (an async event that is not an error)",
       "A port coming back or a subnet manager update: harmless by itself; if 'port active' "
       "follows a 'port error', the link flapped (see that finding).", V,
       "https://github.com/linux-rdma/rdma-core/blob/master/libibverbs/verbs.c",
       needle="event"),
    _r("async_event", "nccl", r"(?:got async event|async (?:fatal|non-fatal) event)\s*"
       r"(?:on (?:\w+ \([^)]*\)|device))?\s*:\s*(.+?)\s*$",
       "error", "the NIC reported an asynchronous event: {0}",
       "Read the kernel log of that host around the same time (mlx5_core, Link down/up) for "
       "what the device reported.", V,
       "https://github.com/NVIDIA/nccl/blob/master/src/transport/net_ib.cc", needle="event"),
    # NCCL's async thread gives up reading events once the device failed (NVIDIA/nccl#230).
    _r("async_reader_stopped", "nccl", r"Call to ibv_get_async_event failed",
       "warning", "NCCL stopped reading the NIC's events after the device error (a "
       "consequence)", "Act on the device error reported with it.", V,
       "https://github.com/NVIDIA/nccl/issues/230", consequence=True,
       needle="ibv_get_async_event"),
    # DMA-BUF: AddyLaddy on NVIDIA/nccl#778: a driver without DMA-BUF; NCCL_DMABUF_ENABLE=0.
    _r("dmabuf_unsupported", "nccl", r"ibv_reg_dmabuf_mr failed.*(?:not supported|"
       r"Operation not permitted|Invalid argument|errno 95)",
       "error", "GPU memory registration through DMA-BUF failed (ibv_reg_dmabuf_mr: not "
       "supported): a driver/kernel without DMA-BUF support",
       "The NIC driver or kernel has no DMA-BUF support (needs kernel 5.12+, rdma-core 34+ "
       "and an OFED/driver that implements it; an open GPU kernel module on the GPU side). "
       "Work around with NCCL_DMABUF_ENABLE=0 (NCCL then uses nvidia_peermem if loaded), "
       "or update the NIC driver stack; this is not the memlock limit.", C,
       "https://github.com/NVIDIA/nccl/issues/778", needle="dmabuf"),
    # NVLink SHARP: NCCL 2.29 prints its own three-line explanation (kept by the parser);
    # nvls.cc CUDA failures before 2.29: a Fabric Manager restarted without a GPU reset
    # (NVIDIA/nccl#976, nccl-tests#276, nccl#1488).
    # CUDA error 2 'out of memory' from NVLS setup is not GPU memory: the NVSwitches have a
    # fixed number of multicast objects (128) and NCCL 2.29 takes one per NVLS communicator,
    # crashing instead of falling back once they are used up (NVIDIA/nccl#2077: Fabric Manager
    # healthy, 2.28.9 fell back). Before the Fabric Manager rule below: it is not FM's fault.
    _r("nvls_failure", "nccl", r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory.*?"
       r"CUDA error 2 'out of memory'",
       "error", "NVLink SHARP (NVLS) multicast objects exhausted (CUDA error 2 'out of "
       "memory' while binding NVLS multicast memory): every NVLS communicator takes one of the "
       "NVSwitches' fixed multicast slots, and too many communicators (e.g. FSDP/TP "
       "sub-groups) used them up; not GPU memory and not the Fabric Manager",
       "Set NCCL_NVLS_ENABLE=0 (or NCCL_ALGO=^NVLS) for the job, or create fewer "
       "communicators that use NVLS (destroy unused process groups; fewer sub-groups); "
       "NCCL 2.28 fell back to other algorithms instead of failing. The Fabric Manager is not "
       "at fault here: `nvidia-smi -q | grep -A3 Fabric` shows State Completed.", C,
       "https://github.com/NVIDIA/nccl/issues/2077", needle="nvls"),
    # Without the bind message the log cannot tell GPU memory from multicast slots.
    _r("nvls_failure", "nccl", r"nvls\.cc:\d+ (?:NCCL )?WARN Cuda failure (?:2 )?'out of memory'",
       "error", "NCCL's NVLink SHARP (NVLS) setup ran out of memory (CUDA 'out of memory' in "
       "nvls.cc): GPU memory for NVLS buffers, or the NVSwitches' multicast objects used up "
       "by many NVLS communicators; not the Fabric Manager",
       "NCCL_NVLS_ENABLE=0 avoids both. `nvidia-smi --query-gpu=memory.used,memory.total "
       "--format=csv` at the failure tells which: a full GPU is GPU memory (leave NCCL "
       "headroom), free memory means the multicast slots (fewer communicators using NVLS).",
       C, "https://github.com/NVIDIA/nccl/issues/2077", needle="nvls"),
    _r("nvls_failure", "nccl", r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory.*?"
       r"CUDA error (\d+) '([^']*)'",
       "error", "NVLink SHARP (NVLS) multicast memory could not be bound: CUDA error {0} "
       "'{1}'",
       "A Fabric Manager or NVSwitch problem, not NCCL's: check `systemctl status "
       "nvidia-fabricmanager` and `nvidia-smi -q | grep -A3 Fabric` (State Completed, "
       "Status Success); after a Fabric Manager restart the GPUs need a reset (stop FM, "
       "nvidia-smi -r, start FM) or the host a reboot. NCCL_NVLS_ENABLE=0 avoids NVLS "
       "meanwhile.", B, "https://github.com/NVIDIA/nccl/issues/976", needle="nvls"),
    _r("nvls_failure", "nccl", r"nvls\.cc:\d+ (?:NCCL )?WARN Cuda failure (?:(\d+) )?'([^']*)'?",
       "error", "NCCL's NVLink SHARP (NVLS) setup failed with CUDA error '{1}'",
       "Usually the Fabric Manager was stopped and restarted while the GPUs held NVSwitch "
       "resources: reset the GPUs in the documented sequence (stop FM, nvidia-smi -r, start "
       "FM) or reboot; check `nvidia-smi -q | grep -A3 Fabric`. NCCL_NVLS_ENABLE=0 disables "
       "NVLS meanwhile.", B, "https://github.com/NVIDIA/nccl/issues/976", needle="nvls"),
    # A rank whose host found no RDMA device listens with NET/Socket while its peer connects
    # with NET/IB (NVIDIA/nccl-tests#188, sjeaugey: make IB work on both nodes; LlamaFactory#3641:
    # "wrong type 3 != 4", NCCL_IB_DISABLE=1 made it run).
    _r("network_mismatch", "nccl", r"socketFinalizeAccept: wrong type (\d+) != (\d+)",
       "error", "a peer connected with another kind of NCCL connection (type {0} != {1}): the "
       "ranks use different networks, InfiniBand/RoCE on some hosts and TCP sockets on others",
       "Every rank must pick the same network: find the hosts whose log says 'NET/IB : No "
       "device found' or 'Using network Socket' and make their RDMA devices usable (ibv_devinfo "
       "there and in the container, /dev/infiniband mapped, NCCL_IB_HCA); NCCL_IB_DISABLE=1 "
       "on every host runs all of them over sockets instead (much slower).", C,
       "https://github.com/NVIDIA/nccl-tests/issues/188", needle="wrong type"),
    # A connection that is not NCCL's own reached a NCCL listening socket: socket.cc reads the
    # first 8 bytes as the magic ("wrong magic %lx != %lx" WARN up to 2.26; from 2.27 an INFO
    # "socket magic mismatch (peer 0x...)"), drops the connection and accepts again; NCCL can
    # then hang in bootstrap (NVIDIA/nccl#1871: another service on the same interface and
    # port; #1612: a security scan). What the 8 bytes spell names the intruder (magic_text).
    _r("stray_connection", "nccl", r"wrong magic ([0-9a-f]{1,16}) != |(?:from (\S+?):? )?"
       r"socket magic mismatch \(peer 0x([0-9a-f]{1,16}) ",
       "warning", "a connection that is not from this NCCL job reached NCCL's listening "
       "socket (wrong magic 0x{0}{3}): {1}",
       "{2}", V, "https://github.com/NVIDIA/nccl/issues/1871", needle="magic"),
    # Known NCCL bugs whose fix a release note states (rdmaprov/parsers/nccl_releases.py).
    # 2.25.1's INFO line (enqueue.cc); 2.26.2+ words it "cudaArch N ncclMaxSharedMem ..." as a
    # WARN, which this anchored pattern leaves alone.
    _r("nccl_known_bug", "nccl", r"^ncclMaxSharedMem (\d+) exceeds device/fn maxSharedMem (\d+)",
       "error", "NCCL 2.25 needs {0} bytes of shared memory per block and this GPU offers {1} "
       "(a recent Blackwell GPU such as the RTX 50xx): NCCL's kernels cannot launch on it",
       fixed_text("blackwell_shared_mem") + " Not a driver, P2P or network fault; "
       "NCCL_P2P_DISABLE does not help.", F, FIXES["blackwell_shared_mem"].source,
       needle="maxsharedmem"),
    _r("userbuff_register_harmless", "nccl", r"failed to (?:IPC|NET) register userbuff",
       "info", "NCCL could not register a user buffer for zero-copy (a WARN NCCL 2.23-2.25 "
       "print for an optional optimisation): harmless, NCCL copies through its own buffers",
       "Not the cause of a hang or failure: look for the other errors. NCCL "
       + FIXES["userbuff_register_warn"].fixed_in + " made it an INFO (release notes: \""
       + FIXES["userbuff_register_warn"].note + "\"); upgrading silences it.", V,
       "https://github.com/NVIDIA/nccl/issues/1684", needle="register userbuff"),
    # bootstrap.cc: the root collects one hello per rank and each says how many ranks it
    # expects (pytorch/pytorch#46248: WORLD_SIZE 3 while 6 processes joined).
    _r("rank_count_mismatch", "nccl", r"Bootstrap Root ?: mismatch in rank count from procs "
       r"(\d+) ?: ?(\d+)",
       "error", "the processes disagree on the number of ranks ({0} against {1}): the job was "
       "started with inconsistent sizes, or two jobs share one rendezvous",
       "Every process of a communicator must pass the same nranks (WORLD_SIZE, --nproc-per-node "
       "x --nnodes, mpirun -np): compare the launch settings on every host, and give each job "
       "its own rendezvous (MASTER_PORT, NCCL_COMM_ID). Not a network fault.", C,
       "https://github.com/pytorch/pytorch/issues/46248", needle="mismatch in rank count"),
    # argcheck.cc rejects a call's arguments (ncclInvalidArgument); "root should be in the 0..0
    # range" is a communicator of one rank (NVIDIA/nccl#963).
    _r("invalid_usage", "nccl", r"invalid (?:root|peer) \d+ \(root should be in the 0\.\.0 "
       r"range\)",
       "error", "NCCL rejected the call: the communicator has a single rank, so no peer or root "
       "other than 0 exists (ncclInvalidArgument)",
       "The ranks did not join one communicator: each process or thread created its own (a "
       "different ncclUniqueId per rank, nranks 1, or a framework group of size 1). Pass the "
       "same unique id and the full nranks to every ncclCommInitRank. An application error, "
       "not a network one.", C, "https://github.com/NVIDIA/nccl/issues/963", needle="0..0"),
    _r("invalid_usage", "nccl", r"argcheck\.cc:\d+ (?:NCCL )?WARN (.+?)\s*$",
       "error", "NCCL rejected the call's arguments (ncclInvalidArgument): {0}",
       "The application or framework passed NCCL something it cannot use (a root or peer "
       "outside the communicator, a null or host pointer, a wrong type or count): an "
       "application error, not a network or driver fault.", C,
       "https://github.com/NVIDIA/nccl/blob/master/src/misc/argcheck.cc", needle="argcheck"),
    # GPU memory: NCCL allocates its buffers per peer and channel at init and on first use
    # (alloc.h "Cuda failure 'out of memory'" then "Failed to CUDA calloc N bytes"; 2.19+
    # "Cuda failure 2 'out of memory'"). sjeaugey on NVIDIA/nccl#295: the framework left NCCL
    # too little memory; NCCL_BUFFSIZE lowers NCCL's share.
    _r("cuda_oom", "nccl", r"Cuda failure (?:\d+ )?'out of memory'|Failed to CUDA (?:calloc|"
       r"malloc|host alloc)",
       "error", "the GPU ran out of memory under NCCL (CUDA 'out of memory'): not a network "
       "fault",
       "NCCL needs GPU memory of its own for every peer and channel (more ranks and nodes, "
       "NVLS and PXN need more): leave it headroom in the framework (a smaller batch or model "
       "shard; TensorFlow allow_growth; JAX XLA_PYTHON_CLIENT_MEM_FRACTION; a lower serving "
       "memory fraction), check that no other process holds the GPU (nvidia-smi), and shrink "
       "NCCL's share with NCCL_BUFFSIZE=2097152 or NCCL_NVLS_ENABLE=0. Peers that lost this "
       "rank afterwards fail as a consequence.", C,
       "https://github.com/NVIDIA/nccl/issues/295", needle="cuda"),
    # Shared memory between the ranks of one host (shmutils.cc; 2.5-2.6 shm.h
    # "posix_fallocate failed"): a container's /dev/shm is 64 MB unless raised
    # (NVIDIA/nccl#342, #290; NCCL's troubleshooting guide, "Shared memory").
    _r("shm_create", "nccl", r"(?:failed to extend /dev/shm/|Error while creating shared "
       r"memory segment|posix_fallocate failed).*No space left",
       "error", "NCCL could not create its shared-memory segment: /dev/shm is full or too "
       "small (No space left on device)", _SHM_ACTION, C,
       "https://github.com/NVIDIA/nccl/issues/342", needle="no space left"),
    _r("shm_create", "nccl", r"failed to extend /dev/shm/|Error while creating shared memory "
       r"segment",
       "error", "NCCL could not create its shared-memory segment in /dev/shm (the ranks of one "
       "host talk through it)", _SHM_ACTION, C,
       "https://github.com/NVIDIA/nccl/issues/342", needle="shm"),
    _r("shm_attach", "nccl", r"Error while attaching to shared memory segment",
       "error", "a rank could not open the shared-memory segment another rank of its host "
       "created in /dev/shm",
       "The ranks of one host must share /dev/shm: processes in separate containers or pods "
       "need --ipc=host (or one shared /dev/shm mount); systemd-logind's RemoveIPC=yes can "
       "delete segments of a user's processes. NCCL_SHM_DISABLE=1 works around it.", C,
       "https://github.com/NVIDIA/nccl/issues/2190", needle="shared memory"),
    # CollNet/SHARP: NCCL goes on with its own algorithms (transport.cc "Cannot initialize
    # CollNet, using point-to-point network instead"; NVIDIA/nccl#1050).
    _r("collnet_fallback", "nccl", r"Cannot initialize CollNet|SHARP coll init error|"
       r"SHARP group create.*failed|CollNet.*(?:init|setup).*failed|sharp_coll_init failed",
       "warning", "CollNet/SHARP in-network reduction could not start: NCCL fell back to its "
       "own algorithms (ring/tree over the point-to-point network)",
       "Jobs still run, without SHARP offload. If SHARP is wanted: the switches must support "
       "it, sharp_am must run next to the subnet manager, and the HCA port must not be the "
       "one the SM uses; otherwise unset NCCL_COLLNET_ENABLE to silence it.", C,
       "https://github.com/NVIDIA/nccl/issues/1050", needle=""),
    # ---- kernel (mlx5_core, PCIe) -------------------------------------------------------------
    # drivers/net/ethernet/mellanox/mlx5/core/health.c
    _r("mlx5_health", "kernel", r"health compromised - reached miss count",
       "error", "the mlx5 firmware stopped updating its health counter (device's health "
       "compromised)",
       "The adapter's firmware hung: the driver starts a recovery (reset); if it fails or "
       "recurs, reboot the host, update the firmware, and replace the HCA if it persists.", B,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/health.c", needle="miss count"),
    _r("mlx5_health", "kernel", r"Health issue observed, ([^,]+), severity",
       "error", "the mlx5 firmware reported a health syndrome: {0}",
       "A firmware/hardware fault on the adapter: collect `mlxfwreset`/`mstdump` data for the "
       "vendor, reboot to recover, update the firmware; replace the HCA if it recurs.", F,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/health.c", needle="health issue"),
    _r("mlx5_health", "kernel", r"print_health_info.*?synd 0x([0-9a-f]+): (.+?)\s*$",
       "error", "the mlx5 firmware reported health syndrome 0x{0}: {1}",
       "A firmware/hardware fault on the adapter: reboot to recover, update the firmware; "
       "replace the HCA if it recurs.", F,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/health.c", needle="synd"),
    _r("mlx5_health", "kernel", r"mlx5_core.*Fatal error (\d+) detected",
       "error", "mlx5_core detected a fatal device error ({0})",
       "The device entered an error state (PCI read failure or firmware fatal sensor): the "
       "driver resets it; reboot if the port does not come back, and check the kernel log "
       "for PCIe AER errors of the same slot.", B,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/health.c", needle="fatal error"),
    _r("mlx5_fw_timeout", "kernel", r"mlx5_core.*(?:Firmware over \d+ MS in "
       r"(?:pre-initializing|initializing) state|FW is unable to respond)",
       "error", "the mlx5 firmware did not come up (stuck initializing or not responding)",
       "Power-cycle the host (a warm reboot may not reset the adapter), then check the "
       "firmware with mlxfwmanager/flint; reflash or replace the HCA if it stays stuck.", F,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/main.c", needle="firmware"),
    _r("mlx5_recovery_failed", "kernel", r"mlx5_core.*(?:health recovery flow aborted|"
       r"recovery flow aborted|mlx5_health_try_recover.*(?:failed|aborted))",
       "error", "the mlx5 driver could not recover the adapter after a firmware fault",
       "The device stays unusable until the host is power-cycled; update the firmware, and "
       "replace the HCA if it happens again.", B,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/health.c", needle="recover"),
    _r("mlx5_thermal", "kernel", r"mlx5_core.*High temperature on sensors",
       "error", "the adapter reports a high temperature",
       "Check the airflow and fans of that slot and the adapter's temperature (mget_temp); a "
       "NIC that overheats throttles or shuts its link down.", V,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/events.c", needle="temperature"),
    _r("mlx5_cmd_timeout", "kernel", r"mlx5_core.*(?:cmd_work_handler|wait_func).*"
       r"(?:timeout|No done completion)",
       "error", "an mlx5 firmware command timed out",
       "The firmware stopped answering commands: reboot the host; update the firmware if it "
       "recurs.", B,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/cmd.c", needle="timeout"),
    # cmd.c: "%s(0x%x) op_mod(0x%x) failed, status %s(0x%x), syndrome (0x%x), err(%d)"
    _r("mlx5_cmd_error", "kernel", r"mlx5_core.*?(?:mlx5_cmd_out_err|mlx5_cmd_check|"
       r"cmd_status_err)[^ ]*\s+(?:.*?: )?(\w+)\(0x[0-9a-f]+\).*?failed, status ([^(]+?)"
       r"\s*\(0x[0-9a-f]+\), syndrome \(0x([0-9a-f]+)\)",
       "warning", "the mlx5 firmware rejected command {0}: {1} (syndrome 0x{2})",
       "A driver request the firmware refused: usually a feature or resource the firmware "
       "version or configuration lacks (SR-IOV, too many VFs/QPs), or a driver/firmware "
       "mismatch. Compare the driver and firmware versions (ethtool -i) with the release "
       "notes; the syndrome identifies the reason to the vendor.", V,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/cmd.c", needle="failed, status"),
    _r("mlx5_probe_failed", "kernel", r"mlx5_core.*?(?:probe_one|mlx5_init_one|mlx5_load_one|"
       r"init_one|probe of \S+).*?(?:failed|error)\D*(-?\d+)?",
       "error", "mlx5_core failed to initialise the adapter (probe failed)",
       "The driver could not bring the device up: read the lines just before it (firmware "
       "not ready, command failures, PCIe errors); a driver/firmware mismatch or a stuck "
       "firmware is the usual cause: power-cycle, then update the firmware.", F,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/main.c", needle="mlx5"),
    # mlx5 port module events (core/events.c)
    _r("cable_error", "kernel", r"Port module event\[error\]: module (\d+), Cable error, "
       r"(.+?)\s*$",
       "error", "the transceiver/cable in module {0} reports an error: {1}",
       "Reseat the cable or transceiver; replace it (or use a supported one) if the error "
       "stays.", R,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/events.c", needle="port module"),
    _r("cable_unplugged", "kernel", r"Port module event: module (\d+), Cable unplugged",
       "warning", "the cable of module {0} was unplugged",
       "If nobody unplugged it, reseat the cable or transceiver.", L,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/events.c", needle="unplugged"),
    # drivers/pci/pci.c __pcie_print_link_status
    _r("pcie_downtrained", "kernel", r"([\d.]+ Gb/s) available PCIe bandwidth, limited by "
       r"(\S+ GT/s PCIe x\d+|[\d.]+ GT/s x\d+|\S+ x\d+) link at (\S+) \(capable of ([\d.]+ "
       r"Gb/s) with (\S+ GT/s PCIe x\d+|[\d.]+ GT/s x\d+|\S+ x\d+) link\)",
       "warning", "PCIe link width/speed below the device's capability: {0} available, "
       "limited by {1} at {2} (capable of {3} with {4})",
       "A narrower or slower PCIe link caps the NIC or GPU below line rate: reseat the card "
       "or riser, check the slot's BIOS setting (width/generation, bifurcation); if the "
       "limit is an upstream port's, it is the slot or riser.", R,
       "https://github.com/torvalds/linux/blob/master/drivers/pci/pci.c",
       needle="limited by"),
    # mlx5 core/events.c mlx5_pcie_event
    _r("pcie_power", "kernel", r"Detected insufficient power on the PCIe slot(?: \((\d+)W\))?",
       "error", "the NIC detected insufficient power on its PCIe slot",
       "The slot (or riser) does not give the adapter the power it needs: move it to a slot "
       "that does, check the riser and the BIOS slot power setting.", V,
       "https://github.com/torvalds/linux/blob/master/drivers/net/ethernet/mellanox/mlx5/"
       "core/events.c", needle="insufficient power"),
    _r("pcie_aer", "kernel", r"(?:PCIe Bus Error: severity=|AER: (?:Multiple )?)(Uncorrected "
       r"\(Fatal\)|Uncorrect(?:ed|able) \(Non-Fatal\)|Uncorrected|Fatal)",
       "error", "an uncorrected PCIe error ({0})",
       "Uncorrected PCIe errors reset or take the device offline: reseat the card, check the "
       "slot/riser, and replace the part if they recur.", R,
       "https://github.com/torvalds/linux/blob/master/drivers/pci/pcie/aer.c"),
    _r("pcie_aer_corrected", "kernel", r"PCIe Bus Error: severity=Correct",
       "warning", "corrected PCIe errors on a device",
       "Corrected errors are survivable, but many of them point at a marginal slot, riser "
       "or card: watch the rate, reseat if it grows.", V,
       "https://github.com/torvalds/linux/blob/master/drivers/pci/pcie/aer.c",
       needle="pcie bus error"),
    _r("tx_timeout", "kernel", r"mlx5_core \S+ (\S+): TX timeout on queue:? (\d+)",
       "error", "{0}: transmit queue {1} timed out (mlx5 TX timeout)",
       "The NIC stopped completing sends: look for firmware/health messages of the same "
       "device; the driver recovers the queue, reboot if it does not.", B,
       "https://github.com/torvalds/linux/blob/master/net/sched/sch_generic.c",
       needle="t"),
    _r("gpu_xid", "kernel", r"NVRM: Xid \(PCI:([^)]+)\): (\d+)",
       "error", "GPU Xid {1} on {0}",
       "An NVIDIA driver error event: look the number up in NVIDIA's Xid catalog "
       "(docs.nvidia.com/deploy/xid-errors); 79 (fallen off the bus), 48/94/95 (ECC), 74 "
       "(NVLink) and 119/120 (GSP) are hardware or driver state that needs a reset or "
       "reboot, 13/31/43 are usually the application's own faults.", V,
       "https://docs.nvidia.com/deploy/xid-errors/index.html", needle="xid"),
    # Up to 6.7: "NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue 3 timed out" with a stack;
    # from 6.8 one line, the interface in front: "mlx5_core 0000:3b:00.0 eth0: NETDEV
    # WATCHDOG: CPU: 3: transmit queue 3 timed out 5010 ms".
    _r("tx_timeout", "kernel", r"(?:(\S+): NETDEV WATCHDOG: CPU: \d+: |NETDEV WATCHDOG: "
       r"(\S+) .*?)transmit queue (\d+) timed out",
       "error", "{0}{1}: transmit queue {2} timed out (NETDEV WATCHDOG)",
       "The NIC stopped completing sends: look for firmware/health messages of the same "
       "device; the driver recovers the queue, reboot if it does not.", B,
       "https://github.com/torvalds/linux/blob/master/net/sched/sch_generic.c",
       needle="netdev watchdog"),
    # ---- perftest (ib_write_bw, ib_read_lat, ib_send_bw ...) --------------------------------
    # perftest_communication.c / perftest_resources.c messages.
    _r("perftest_oob_connect", "perftest", r"Couldn't connect to ([^\s:]+):(\d+)",
       "error", "the client could not open the TCP connection to the server {0}:{1} (the "
       "out-of-band exchange, before any RDMA)",
       "Nothing answered on {0}:{1}: start the server side first (the same command without "
       "the address), check the address and port (-p) and that no firewall blocks TCP "
       "{1}; this is not an RDMA fault.", C,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_communication.c",
       needle="couldn't connect"),
    _r("perftest_oob_socket", "perftest", r"Unable to init the socket connection|"
       r"Failed to exchange data between server and clients|Couldn't read remote address|"
       r"Unable to read (?:to|from) socket|Failed to close connection between server|"
       r"Couldn't (?:listen|bind) to port",
       "error", "perftest's out-of-band socket exchange failed",
       "The TCP side channel did not come up (server not started, wrong address or port, a "
       "firewall, or the port already in use by another perftest): fix that before reading "
       "anything about the RDMA path.", C,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_communication.c",
       consequence=True, needle=""),
    _r("perftest_qp_rtr", "perftest", r"Failed to modify QP(?: \d+)? to (RTR|RTS|INIT)",
       "error", "connecting the queue pair failed (modify QP to {0})",
       "The two ends reached each other over TCP but the RDMA connection was refused: on "
       "RoCE use a RoCE v2 GID index that exists on both ports (-x, see show_gids), check "
       "the route between the two RDMA interfaces' subnets and the MTU (--mtu no larger "
       "than the active MTU); on InfiniBand the port must be Active with a LID.", C,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_resources.c",
       needle="modify qp"),
    _r("perftest_completion", "perftest", r"Failed status (\d+): wr_id \d+ syndrom(?:e)? "
       r"0x([0-9a-f]+)",
       "error", "a work completion failed with status {0} (syndrome 0x{1})",
       "See the status: 12 (retry exceeded) is an unreachable peer on the fabric (path, GID, "
       "PFC); 4 (local protection) with --use_cuda means GPU memory could not be used by "
       "the NIC (GPUDirect RDMA missing: load nvidia_peermem or use DMA-BUF, "
       "--use_cuda_dmabuf); 10 (remote access) a key or right mismatch.", C,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_resources.c",
       needle="failed status"),
    _r("perftest_run_failed", "perftest", r"Completion with error at (client|server)|"
       r"Failed to complete run_iter_\w+ function",
       "warning", "the test stopped on a failed work completion (a consequence: see the "
       "status)",
       "The status line with it says why.", V,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_resources.c",
       consequence=True, needle=""),
    # host_memory.c: --use_hugepages found no free huge pages (or, with --mr_per_qp, ran out
    # of SysV segments: kernel.shmmni; linux-rdma/perftest#395).
    _r("perftest_hugepages", "perftest", r"Failed to allocate hugepages|Failed to allocate "
       r"hugepage region",
       "error", "perftest was asked for huge pages (--use_hugepages) and could not get them",
       "Reserve huge pages for the buffer: `grep Huge /proc/meminfo` (HugePages_Free), then "
       "`sysctl -w vm.nr_hugepages=N` with N x Hugepagesize at least the buffer size; with "
       "--mr_per_qp each QP takes one SysV segment, so raise kernel.shmmni too; or run "
       "without --use_hugepages.", C, "https://github.com/linux-rdma/perftest/issues/395",
       needle="hugepage"),
    # "Couldn't allocate MR" is ibv_reg_mr failing on perftest's buffer: the locked-memory
    # limit above all (tarickb/the-geek-in-the-corner#6; NVIDIA/nccl-tests#206: ulimit -l 8192).
    _r("perftest_mr", "perftest", r"Couldn't allocate MR|Couldn't register MR|"
       r"ibv_reg_mr failed",
       "error", "the NIC could not register perftest's buffer (memory region): usually the "
       "locked-memory limit",
       "`ulimit -l` in the shell (or container, or job) that ran perftest tells: it must be "
       "unlimited or larger than the buffer (limits.conf memlock, docker --ulimit "
       "memlock=-1, systemd LimitMEMLOCK, srun --propagate); with --use_cuda, GPU memory the "
       "NIC cannot map (nvidia_peermem not loaded, no DMA-BUF: --use_cuda_dmabuf).", C,
       "https://github.com/NVIDIA/nccl-tests/issues/206", needle=""),
    # "Unable to create QP." is ibv_create_qp refusing perftest's sizes; the default inline
    # size (220 bytes for writes) is more than Intel E810/irdma (under 102) or QLogic qedr
    # (128) accept (linux-rdma/perftest#139, #110).
    _r("perftest_qp_inline", "perftest", r"Unable to create QP",
       "error", "the NIC refused perftest's queue pair (ibv_create_qp): most often the inline "
       "data size perftest asks for by default is larger than the device allows (Intel "
       "E810/irdma allows under 102 bytes, QLogic qedr 128)",
       "Rerun with -I 0 (or a small -I such as 64): if it then runs, it was the inline size. "
       "If not, lower the queue sizes (-t tx depth, -r rx depth, -q QPs) to the device's "
       "limits (ibv_devinfo -v: max_qp_wr); `dmesg | tail` may name the rejected "
       "attribute.", C, "https://github.com/linux-rdma/perftest/issues/139",
       needle="create qp"),
    _r("perftest_mr", "perftest", r"Couldn't create (?:CQ|QP)",
       "error", "perftest could not register its buffer or create a queue with the NIC",
       "Usually the locked-memory limit (ulimit -l unlimited) or, with --use_cuda, GPU "
       "memory the NIC cannot map (nvidia_peermem not loaded, no DMA-BUF).", C,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_resources.c",
       needle=""),
    _r("perftest_no_device", "perftest", r"No IB devices found|IB device (\S+) not found|"
       r"Couldn't get context for the device|Unable to find the Infiniband/RoCE device",
       "error", "perftest found no usable RDMA device",
       "Check ibv_devices/ibv_devinfo; in a container map /dev/infiniband and the rdma "
       "resource; name the device with -d as ibv_devices lists it.", C,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_parameters.c",
       needle=""),
    _r("perftest_port_down", "perftest", r"Port number (\d+) state is (\w+)",
       "error", "perftest refused to run: port {0} is {1}",
       "The port must be Active: check the cable and switch port (ibstat, ibv_devinfo); on "
       "InfiniBand the subnet manager must be running.", L,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_parameters.c",
       needle="port number"),
    _r("perftest_rdma_cm", "perftest", r"RDMA_CM_EVENT_(ADDR_ERROR|ROUTE_ERROR|UNREACHABLE|"
       r"REJECTED|CONNECT_ERROR)|Unable to perform rdma_client function|"
       r"Failed to handle RDMA CM event",
       "error", "the RDMA CM connection (-R) failed: {0}",
       "With -R the address must be an IP of the peer's RDMA interface (IPoIB or the RoCE "
       "netdev), routed from this host's RDMA interface: check `ip addr` on both, ping "
       "between them from that interface, and that the server runs with -R too.", C,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_communication.c",
       needle=""),
    _r("perftest_mtu", "perftest", r"Requested mtu is higher than active mtu",
       "error", "the requested MTU is larger than the port's active MTU",
       "Drop --mtu or raise the port MTU (RoCE: the netdev MTU; IB: the partition MTU).", C,
       "https://github.com/linux-rdma/perftest/blob/master/src/perftest_parameters.c",
       needle="mtu"),
)

_SEV_ORDER = {"error": 0, "warning": 1, "info": 2}
# Codes of rules that only restate an earlier failure: never "the first failure".
CONSEQUENCE_CODES = frozenset(r.code for r in RULES if r.consequence)


@dataclass
class Diagnosis:
    code: str
    severity: str
    cause: str
    action: str
    remedy: str
    source: str
    line: str
    count: int = 1
    line_no: int = 0
    consequence: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def finding(self) -> Finding:
        times = f" (x{self.count})" if self.count > 1 else ""
        return Finding(self.severity, self.cause + times, self.action, self.code, self.remedy)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "cause": self.cause,
                "action": self.action, "remedy": self.remedy, "source": self.source,
                "line": self.line, "count": self.count, "line_no": self.line_no}


# Remediation classes of the NCCL diagnoses whose message the NCCL log parser composes itself
# (they need the log's context: counts, GID indexes, environment). Sources: the hints in
# rdmaprov/parsers/nccl_log.py and the threads in tests/fixtures/explain/index.yaml.
CODE_REMEDY: dict[str, Remedy] = {
    "socket_fallback": C, "no_interface": C, "address_family": C, "subnet": C,
    "bind_address": C, "qp_link_local_gid": C, "qp_unreachable": C, "qp_timeout": C,
    "qp_no_device": C, "qp_setup": C, "verbs_open_device": C, "verbs_memlock": C,
    "verbs_call": V, "memory_registration": C, "no_libibverbs": C, "plugin_no_device": C,
    "plugin_network": C, "plugin": V, "bridge_interface": C, "docker_bridge": C,
    "link_local_address": C, "duplicate_gpu": C, "verbs_provider": C,
    "verbs_provider_abi": C, "env_removed": C, "env_deprecated": C, "env_unknown": C,
    "env_nccl_says": C, "peer_lost": V, "remote_error": V, "completion": V, "timeout": V,
    "watchdog": V, "watchdog_silent": V, "watchdog_behind": V, "watchdog_stuck": V,
    "watchdog_desync": V,
    "system_error": V, "cuda_error": V, "nccl_error": V, "socket": C, "consequence": V,
    "proxy": V, "comm_abort": V, "first_failure": V, "version_from_env": C,
}


def remedy_for(code: str | None) -> str | None:
    """The remediation class of a diagnosis code: its rule's, else the table above."""
    if not code:
        return None
    for r in RULES:
        if r.code == code:
            return r.remedy.value
    rem = CODE_REMEDY.get(code)
    return rem.value if rem else None


def _fmt(text: str, groups: tuple[str | None, ...]) -> str:
    try:
        return text.format(*((g or "").strip() for g in groups))
    except (IndexError, KeyError, ValueError):
        return text


def match(line: str, scope: str | None = None) -> tuple[Rule, re.Match[str]] | None:
    """The first rule of ``scope`` (all scopes when None) whose pattern is in the line."""
    low = line.lower()
    for rule in RULES:
        if scope is not None and rule.scope != scope:
            continue
        if rule.needle and rule.needle not in low:
            continue
        m = rule.pattern.search(line)
        if m:
            return rule, m
    return None


# A client that closes before sending 8 bytes failed the bootstrap before 2.27.3.
_SHORT_MAGIC = ("Before NCCL " + FIXES["bootstrap_short_magic"].fixed_in + " such a client "
                "closing before sending 8 bytes failed the bootstrap itself (NVIDIA/nccl#1612; "
                "release notes: \"" + FIXES["bootstrap_short_magic"].note + "\").")

# The first bytes an HTTP client, a TLS client or SSH send, as they start NCCL's 8-byte magic.
_PROTOCOLS = (
    (("GET ", "HEAD", "POST", "PUT ", "OPTI", "DELE", "PATC", "CONN"),
     "the bytes spell an HTTP request ({text!r}): an HTTP client (a health or liveness probe, "
     "a Prometheus scrape, a load balancer check) is connecting to NCCL's port",
     "Find the prober and point it at the service's own port only: `ss -tnp | grep <port>` on "
     "this host while it runs, or the peer address in NCCL's line; a Kubernetes "
     "liveness/readiness probe or a PodMonitor/ServiceMonitor scraping every container port "
     "(and prometheus.io/port annotations missing) are the usual ones. NCCL drops such "
     "connections and accepts again, but a bootstrap can hang on them (NVIDIA/nccl#1871). "
     + _SHORT_MAGIC),
    (("SSH-",),
     "the bytes spell an SSH greeting ({text!r}): an SSH client or scanner connected to NCCL's "
     "port",
     "Find it with `ss -tnp` on this host (or the peer address in NCCL's line) and keep it off "
     "the ports the job listens on."),
)


def magic_text(hexval: str) -> str:
    """NCCL's magic as printed (%lx of the first 8 bytes read, little-endian) back to bytes."""
    try:
        raw = int(hexval, 16).to_bytes(8, "little")
    except (ValueError, OverflowError):
        return ""
    return "".join(chr(b) if 32 <= b < 127 else "." for b in raw)


def _stray_groups(g: tuple[str | None, ...]) -> tuple[str | None, ...]:
    """(magic, cause, action, " from PEER") for the stray_connection rule's text."""
    hexval = g[0] or g[2] or ""
    peer = f"; from {g[1]}" if g[1] else ""
    text = magic_text(hexval)
    if raw_tls(hexval):
        return (hexval, "the bytes are a TLS handshake: an HTTPS client or a TLS health check "
                "is connecting to NCCL's port",
                "Find it with `ss -tnp` on this host (or the peer address in NCCL's line) and "
                "keep it off the ports the job listens on.", peer)
    for starts, cause, action in _PROTOCOLS:
        if text.startswith(starts):
            return (hexval, cause.format(text=text), action, peer)
    return (hexval, "another NCCL job or communicator on the same address and port (a shared "
            "NCCL_COMM_ID or MASTER_ADDR:MASTER_PORT, two containers of one host), or a port "
            "scanner",
            "Give each job its own rendezvous (NCCL_COMM_ID, MASTER_PORT) and check what "
            "connects to this host's NCCL ports (`ss -tnp` while it runs); NCCL drops the "
            "connection and accepts again, so this is harmless unless the job then hangs in "
            "bootstrap (NVIDIA/nccl#1871). " + _SHORT_MAGIC, peer)


def raw_tls(hexval: str) -> bool:
    """A TLS record header (0x16 0x03 ...) as the first bytes."""
    try:
        raw = int(hexval, 16).to_bytes(8, "little")
    except (ValueError, OverflowError):
        return False
    return raw[:2] == b"\x16\x03"


_GROUPS = {"stray_connection": _stray_groups}


def diagnosis(rule: Rule, m: re.Match[str], line: str, line_no: int = 0) -> Diagnosis:
    g = m.groups()
    if rule.code in _GROUPS:
        g = _GROUPS[rule.code](g)
    return Diagnosis(rule.code, rule.severity, _fmt(rule.cause, g), _fmt(rule.action, g),
                     rule.remedy.value, rule.source, line.strip()[:400], 1, line_no,
                     rule.consequence)


class Diagnoser:
    """Streaming form of ``diagnose``: feed lines, ``result()`` lists the diagnoses."""

    def __init__(self, scope: str | None = None, limit: int = 64) -> None:
        self.scope = scope
        self.limit = limit
        self.found: dict[tuple[str, str], Diagnosis] = {}
        self.n = 0

    def feed(self, line: str) -> Diagnosis | None:
        self.n += 1
        hit = match(line, self.scope)
        if hit is None:
            return None
        d = diagnosis(hit[0], hit[1], line, self.n)
        key = (d.code, d.cause)
        old = self.found.get(key)
        if old is not None:
            old.count += 1
            return old
        if len(self.found) < self.limit:
            self.found[key] = d
        return d

    def result(self) -> list[Diagnosis]:
        # Causes before consequences; within each, errors first, then the order of the text.
        return sorted(self.found.values(),
                      key=lambda d: (d.consequence, _SEV_ORDER.get(d.severity, 3), d.line_no))


def diagnose(lines: Iterable[str], scope: str | None = None) -> list[Diagnosis]:
    """Every rule's diagnosis over the text, the first error first (see the module doc)."""
    d = Diagnoser(scope)
    for raw in lines:
        d.feed(clean(raw))
    return d.result()
