"""Shared pieces of the text parsers: findings, port records, line clean-up, rate strings."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("error", "warning", "info")


@dataclass
class Finding:
    severity: str  # error | warning | info
    message: str
    hint: str | None = None
    code: str | None = None  # stable name of the diagnosis (JSON "code"), where it has one
    remedy: str | None = None  # rdmaprov.remediation.Remedy value, where a rule gives one

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["code"] is None:
            del d["code"]
        if d["remedy"] is None:
            del d["remedy"]
        return d


@dataclass
class Port:
    """One HCA port as a listing tool shows it; None where the format does not say."""

    device: str | None
    port: int | None
    state: str | None = None  # ACTIVE, DOWN, INIT, ARMED
    phys_state: str | None = None  # LinkUp, Disabled, Polling, ...
    rate_gbps: float | None = None
    link_layer: str | None = None  # InfiniBand | Ethernet
    active_mtu: int | None = None
    lid: int | None = None
    netdev: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rate_gbps"] = num(self.rate_gbps)
        extra = d.pop("extra")
        d.update(extra)
        return d


# Launchers and log collectors put these in front of every line; each pattern is anchored.
# In order below: mpirun/Horovod tags, srun --label, rank tags (torchrun), Ray, CloudWatch,
# ISO timestamps, syslog/journalctl ("Dec  4 17:21:16 host kernel: "), dmesg -T, dmesg,
# kubectl --prefix, docker compose/stern ("pod-name | "), a markdown quote.
_PREFIXES = re.compile(
    r"""^(?:
        \s*\[\d+(?:,\d+)?\]<\w+>:\s?        # mpirun [1,0]<stdout>:, Horovod [0]<stderr>:
      | \s*\d+:\s                          # srun --label: "3: "
      | \s*\[\d+\]\s                        # torchrun/launcher rank tag: [155]
      | \s*\[rank\d+\]:\s?                  # torchrun 2.2+ per-rank prefix: [rank0]:
      | \s*\((?:\w+\s+)?pid=\d+(?:,\s*ip=[\d.]+)?\)\s   # Ray: (RayWorkerWrapper pid=9, ip=..)
      | \s*\|\s*\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?\s*\|?\s*   # CloudWatch | ts |
      | \s*\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\s+(?:\|\s+)?  # ISO timestamp
      | \s*\[\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\]\s*     # [2025-10-16 22:16:08]
      | \s*[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\S+\s+[\w./@-]+(?:\[\d+\])?:\s
      | \s*\[[A-Z][a-z]{2}\s+[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\d{4}\]\s*
      | \s*\[\s*\d+\.\d+\]\s*               # dmesg: "[  12.345678] "
      | \s*\[pod/[^\]\s]+\]\s               # kubectl logs --prefix
      | \s*[A-Za-z][\w.-]*\s+\|\s            # docker compose / stern: "pod-name | "
      | \s*>\s                              # markdown quote of a paste
    )""",
    re.X,
)
# Terminal control sequences (colours, cursor moves, OSC titles) that a log copied from a
# terminal or CI page keeps.
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def clean(line: str) -> str:
    """Strip CR/LF, control sequences, launcher prefixes (repeatedly: they nest) and markdown
    bold markers."""
    line = line.rstrip("\r\n")
    if "\x1b" in line:
        line = ANSI.sub("", line)
    for _ in range(4):
        m = _PREFIXES.match(line)
        if not m or m.end() == 0:
            break
        line = line[m.end():]
    if "**" in line:
        line = line.replace("**", "")
    return line


def split_pasted(line: str) -> list[str]:
    """A line as the parsers should see it: control sequences out, and a one-line pasted
    exception (its newlines written as the two characters \\n) cut into its lines."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if "\\n" in line:
        return line.split("\\n")
    return [line]


_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:Gb/sec|Gbps|Gb/s|G)?", re.I)


def parse_rate(text: str) -> float | None:
    """'200', '100 Gb/sec (4X EDR)', '25.0 Gbps' -> Gb/s."""
    m = _RATE.search(text or "")
    if not m:
        return None
    try:
        return float(m.group(1))
    except ValueError:
        return None


def to_int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def num(value: float | None) -> float | int | None:
    """Whole floats as ints in JSON (200 rather than 200.0)."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


_STATE_WORDS = {"active": "ACTIVE", "down": "DOWN", "init": "INIT", "armed": "ARMED",
                "port_active": "ACTIVE", "port_down": "DOWN", "port_init": "INIT",
                "port_armed": "ARMED"}


def norm_state(text: str | None) -> str | None:
    """'Active', 'PORT_ACTIVE (4)', '4: ACTIVE' -> 'ACTIVE'."""
    if not text:
        return None
    for word in re.split(r"[\s:()]+", text.strip()):
        s = _STATE_WORDS.get(word.lower())
        if s:
            return s
    return None


_PHYS = {"linkup": "LinkUp", "link_up": "LinkUp", "disabled": "Disabled", "polling": "Polling",
         "sleep": "Sleep", "linkerrorrecovery": "LinkErrorRecovery",
         "link_error_recovery": "LinkErrorRecovery", "phytest": "PhyTest",
         "portconfigurationtraining": "PortConfigurationTraining"}


def norm_phys(text: str | None) -> str | None:
    if not text:
        return None
    for word in re.split(r"[\s:()]+", text.strip()):
        p = _PHYS.get(word.lower())
        if p:
            return p
    return None


def norm_link_layer(text: str | None) -> str | None:
    if not text:
        return None
    t = text.strip().lower()
    if t.startswith("infiniband") or t == "ib":
        return "InfiniBand"
    if t.startswith("ethernet") or t in ("eth", "roce"):
        return "Ethernet"
    return None


def port_findings(ports: list[Port]) -> list[Finding]:
    """What is wrong with a set of ports, whatever tool listed them."""
    out: list[Finding] = []
    for p in ports:
        name = f"{p.device or '?'} port {p.port if p.port is not None else '?'}"
        if p.device and p.device.startswith(("rxe", "siw")):
            out.append(Finding(
                "warning", f"{name} is a software RDMA device ({p.device.split('_')[0]}): "
                "no hardware offload",
                "Soft-RoCE/siw is for functional tests; NCCL over it runs slower than "
                "Socket. Use a hardware RDMA NIC for real jobs."))
        down = p.state in ("DOWN", "INIT", "ARMED")
        if p.state == "DOWN" and p.phys_state == "LinkUp" and p.link_layer == "InfiniBand":
            out.append(Finding(
                "error", f"{name}: the cable link is up (LinkUp) but the port is Down"
                + (" and has no LID" if p.lid in (0, 65535) else ""),
                "On InfiniBand a subnet manager must bring the port to Active: check that "
                "opensm/UFM runs on the fabric (sminfo) and, for SR-IOV VFs, that the VF has "
                "a GUID and the SM supports virtualization."))
        elif p.state in ("INIT", "ARMED"):
            out.append(Finding(
                "error", f"{name} is {p.state}: the link trained but the subnet manager has "
                "not activated it", "Check the subnet manager (sminfo; systemctl status opensm)."))
        elif p.state == "DOWN":
            why = {"Polling": "no link partner (cable, transceiver or switch port down)",
                   "Disabled": "the port is administratively disabled",
                   "Sleep": "the port is asleep (disabled by the driver or firmware)"}.get(
                       p.phys_state or "", "")
            out.append(Finding(
                "warning", f"{name} is Down" + (f": {why}" if why else ""),
                "If NCCL should use it: check cable and switch port; else exclude it "
                "(NCCL_IB_HCA) so no rank picks it."))
        if (not down and p.active_mtu is not None and p.active_mtu < 4096):
            hint = ("For RoCE the RDMA MTU follows the netdev MTU: set the interface MTU to "
                    "9000 (4200 at least) on hosts and switches."
                    if p.link_layer == "Ethernet" else
                    "Raise the partition MTU on the subnet manager (opensm partitions.conf "
                    "mtu=5) so ports run at 4096.")
            out.append(Finding("warning", f"{name}: active MTU {p.active_mtu} is below 4096",
                               hint))
        if (p.link_layer == "InfiniBand" and p.state == "ACTIVE"
                and p.lid is not None and p.lid in (0, 65535)):
            out.append(Finding("error", f"{name} is Active but has no LID ({p.lid})",
                               "The subnet manager did not assign a LID; check it."))
        rate_str = p.extra.get("rate_string") or ""
        ib_rate = re.search(r"\b(SDR|DDR|QDR|FDR|EDR|HDR|NDR|XDR)\b", rate_str)
        if p.link_layer == "Ethernet" and ib_rate:
            ib_name = ib_rate.group(1)
            out.append(Finding(
                "warning", f"{name} is an Ethernet (RoCE) port although its rate says "
                f"'{rate_str.strip()}'",
                f"'{ib_name}' is only InfiniBand's name for the lane speed. The port runs "
                "Ethernet: NCCL uses it as RoCE, which needs a RoCE v2 GID index "
                "(NCCL_IB_GID_INDEX, see show_gids) and a lossless class (PFC/ECN)."))
    layers = {p.link_layer for p in ports if p.link_layer}
    if len(layers) > 1:
        out.append(Finding(
            "info", "this host mixes InfiniBand and Ethernet (RoCE) ports",
            "Pin NCCL to the fabric you mean with NCCL_IB_HCA; RoCE ports also need "
            "NCCL_IB_GID_INDEX."))
    return out


# libibverbs' own warnings (stderr of any verbs program: ibv_devinfo, perftest, NCCL): the
# userspace provider for the NIC is missing from the image, or does not match the kernel.
_VERBS_WARN = re.compile(
    r"libibverbs: Warning: (?:no userspace device-specific driver found for (\S+)"
    r"|Driver (\S+) does not support the kernel ABI of (\d+) \(supports (\d+) to (\d+)\)"
    r"|couldn't load driver '([^']+)')")


class VerbsWarnings:
    """Collects libibverbs warnings from any text; ``findings()`` says what they mean."""

    def __init__(self) -> None:
        self.no_driver: list[str] = []
        self.abi: dict[str, tuple[str, str, str]] = {}
        self.load_failed: list[str] = []

    def feed(self, line: str) -> bool:
        m = _VERBS_WARN.search(line)
        if not m:
            return False
        if m.group(1) and m.group(1) not in self.no_driver and len(self.no_driver) < 64:
            self.no_driver.append(m.group(1))
        elif m.group(2):
            self.abi.setdefault(m.group(2), (m.group(3), m.group(4), m.group(5)))
        elif m.group(6) and m.group(6) not in self.load_failed and len(self.load_failed) < 16:
            self.load_failed.append(m.group(6))
        return True

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        if self.no_driver:
            out.append(Finding(
                "error", f"libibverbs has no userspace driver (provider) for "
                f"{len(self.no_driver)} verbs device(s): {', '.join(self.no_driver[:4])}",
                "The image lacks the provider library for this NIC (mlx5: libmlx5 from "
                "rdma-core's ibverbs-providers, or the MLNX_OFED/DOCA user space): install the "
                "one matching the host's driver stack inside the image; without it no verbs "
                "program (NCCL included) sees the HCA.", "verbs_provider"))
        for drv, (abi, lo, hi) in sorted(self.abi.items()):
            out.append(Finding(
                "error", f"the {drv} provider in this userspace supports kernel ABI {lo} to "
                f"{hi}, the kernel's is {abi}: the device is skipped",
                f"The image's {drv} library and the host's kernel driver are from different "
                "releases: install the rdma-core (or vendor user space) that matches the "
                "host's driver in the image.", "verbs_provider_abi"))
        if self.load_failed and not (self.no_driver or self.abi):
            out.append(Finding(
                "info", "libibverbs could not load provider(s) "
                + ", ".join(self.load_failed[:4]),
                "Harmless unless the NIC needs that provider: libibverbs tries every driver "
                "listed in /etc/libibverbs.d."))
        return out
