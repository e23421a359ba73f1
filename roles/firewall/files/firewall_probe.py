#!/usr/bin/python3
# Read-only probe of the firewall role, run on the node by ansible.builtin.script. Prints one
# JSON document; decisions are made on the control host.
#   firewall_probe.py NFT_TABLE FIREWALLD_ZONE
import json
import os
import shutil
import subprocess
import sys


def run(argv):
    if not shutil.which(argv[0]):
        return {"rc": None, "stdout": "", "stderr": f"{argv[0]}: not installed"}
    proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "LC_ALL": "C"})
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def main():
    table, zone = sys.argv[1], sys.argv[2]
    parts = os.environ.get("SSH_CONNECTION", "").split()
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            port_range = fh.read().strip()
    except OSError:
        port_range = "32768 60999"
    ufw = run(["ufw", "status"])
    out = {
        "control_ip": parts[0] if len(parts) == 4 else None,
        "firewalld_active": run(["systemctl", "is-active", "firewalld"])["stdout"].strip() == "active",
        "ufw_active": ufw["rc"] == 0 and "Status: active" in ufw["stdout"],
        "nft_present": bool(shutil.which("nft")),
        "systemd_run": bool(shutil.which("systemd-run")),
        "local_port_range": port_range,
        # Text, not -j: nft 1.0.6's JSON leaves out the table comment that carries our hash.
        "nft_table": run(["nft", "list", "table", "inet", table]),
        "firewalld_zone": run(["firewall-cmd", "--permanent", f"--zone={zone}", "--list-all"]),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
