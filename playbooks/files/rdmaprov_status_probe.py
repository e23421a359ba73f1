"""Read-only snapshot of one node for `rdmaprov status`: prints one JSON document.

Runs on the node through ansible.builtin.script, with the node's own python3 (stdlib only).
Reads /sys, /proc and a few tools' version output; writes nothing.
"""

import glob
import json
import os
import re
import shutil
import subprocess

QOS_UNIT = "rdmaprov-roce-qos.service"
# What the unit's script logs per interface (roles/roce_qos/templates/rdmaprov-roce-qos.sh.j2).
QOS_LINE = re.compile(r"^rdmaprov-roce-qos: (\S+): "
                      r"(not capable: .*|DCB settings applied|no such interface)$")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def run(argv):
    if shutil.which(argv[0]) is None:
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p


def drivers():
    p = run(["ofed_info", "-s"])
    if p is not None and p.returncode == 0 and p.stdout.strip():
        return p.stdout.strip().rstrip(":")
    p = run(["dpkg-query", "-W", "-f=${Version}", "rdma-core"])
    if p is None:
        p = run(["rpm", "-q", "--qf", "%{VERSION}", "rdma-core"])
    if p is not None and p.returncode == 0 and p.stdout.strip():
        return "rdma-core " + p.stdout.strip()
    return None


def mtus():
    out = {}
    for path in sorted(glob.glob("/sys/class/net/*/mtu")):
        name = path.split("/")[-2]
        if name != "lo":
            out[name] = int(read(path) or 0)
    return out


def qos_results(journal):
    """{interface: what the unit's last run logged for it}, from the unit's journal lines."""
    lines = journal.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Starting ")]
    found = {}
    for line in lines[starts[-1] if starts else 0:]:
        m = QOS_LINE.match(line.strip())
        if m:
            found[m.group(1)] = m.group(2)
    return found


def qos():
    unit = run(["systemctl", "show", "-p", "LoadState,ActiveState", QOS_UNIT])
    props = dict(ln.split("=", 1) for ln in (unit.stdout if unit else "").splitlines()
                 if "=" in ln)
    loaded = props.get("LoadState") not in (None, "not-found")
    result = {"unit": props.get("ActiveState") if loaded else None,
              "script": os.path.exists("/usr/local/sbin/rdmaprov-roce-qos"), "nics": None}
    if loaded:
        # An active oneshot unit only says the script ran; what it did per NIC is in its log.
        j = run(["journalctl", "-b", "-u", QOS_UNIT, "-o", "cat", "--no-pager", "-n", "500"])
        if j is not None and j.returncode == 0:
            result["nics"] = qos_results(j.stdout)
    return result


def firewall():
    # The firewall role's backends: its firewalld policy, its ufw rules, or its nftables table.
    p = run(["firewall-cmd", "--policy=rdmaprov", "--list-rich-rules"])
    if p is not None and p.returncode == 0:
        return "firewalld policy rdmaprov, %d rules" % len(p.stdout.splitlines())
    p = run(["ufw", "status"])
    if p is not None and p.returncode == 0 and "# rdmaprov" in p.stdout:
        state = "active" if "Status: active" in p.stdout else "inactive"
        return "ufw %s, %d rdmaprov rules" % (state, p.stdout.count("# rdmaprov"))
    p = run(["nft", "list", "table", "inet", "rdmaprov"])
    if p is None:
        return None
    if p.returncode != 0:
        return "no rdmaprov table"
    rules = len([ln for ln in p.stdout.splitlines() if re.search(r"\b(accept|drop)\b", ln)])
    policy = re.search(r"hook input .*policy (accept|drop);", p.stdout)
    return "rdmaprov table, %d rules%s" % (rules, ", policy " + policy.group(1) if policy else "")


def runtime():
    for engine in ("docker", "podman"):
        p = run([engine, "--version"])
        if p is not None and p.returncode == 0:
            m = re.search(r"(\d+\.\d+(\.\d+)?)", p.stdout)
            return "%s %s" % (engine, m.group(1) if m else "?")
    return None


def last_validation():
    rcs = glob.glob("/var/tmp/rdmaprov-validate/*/rc")
    if not rcs:
        return None
    newest = max(rcs, key=os.path.getmtime)
    rc = read(newest)
    # Exit 0 says the worker ran, not that the run passed: the verdict is the judge's, on the
    # controller (rdmaprov/validate/record.py).
    return {"label": newest.split("/")[-2], "rc": rc, "mtime": int(os.path.getmtime(newest))}


def gpus():
    return len(glob.glob("/proc/driver/nvidia/gpus/*")) or len(
        [d for d in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", d)])


if __name__ == "__main__":
    print(json.dumps({
        "drivers": drivers(), "mtu": mtus(), "qos": qos(),
        "firewall": firewall(), "runtime": runtime(), "gpus": gpus(),
        "rdma_devices": sorted(os.listdir("/sys/class/infiniband"))
        if os.path.isdir("/sys/class/infiniband") else [],
        "validation": last_validation(),
    }))
