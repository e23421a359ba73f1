"""host_capabilities gathers Ansible's own facts in its call (option gather_subset), as the setup
module gathers them: the preflight role reads the host in one module call instead of two. Both
modules run here, on this machine, through Ansible, and must give the same facts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUBSET = ["!all", "min", "network"]
# Facts that hold still between two calls a second apart on a machine where other work adds and
# removes network interfaces (the labs' veths): compared by value.
STABLE = ("ansible_os_family", "ansible_distribution", "ansible_distribution_version",
          "ansible_distribution_release", "ansible_kernel", "ansible_architecture",
          "ansible_machine", "ansible_hostname", "ansible_nodename", "ansible_system",
          "ansible_service_mgr", "ansible_user_id", "ansible_lo", "ansible_python_version",
          "ansible_virtualization_type", "gather_subset", "module_setup")


def _names(facts: dict) -> set[str]:
    """The facts' names, less one per network interface (which come and go here)."""
    ifaces = {"ansible_" + i.replace("-", "_") for i in facts.get("ansible_interfaces", [])}
    return set(facts) - ifaces


def _run(tmp_path: Path, module: str, args: dict) -> dict:
    colls = tmp_path / "collections" / "ansible_collections" / "rdmaprov"
    colls.mkdir(parents=True, exist_ok=True)
    if not (colls / "cluster").exists():
        (colls / "cluster").symlink_to(ROOT, target_is_directory=True)
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "collections"),
           "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
           "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    ansible = str(Path(sys.executable).with_name("ansible"))
    out = subprocess.run([ansible, "localhost", "-c", "local", "-m", module, "-a",
                          json.dumps(args)], capture_output=True, text=True, env=env,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    # Ad hoc's minimal callback: "localhost | SUCCESS => {...}".
    return json.loads(out.stdout[out.stdout.index("localhost | "):].split(" => ", 1)[1])


def test_gathered_facts_are_setups(tmp_path):
    setup = _run(tmp_path, "ansible.builtin.setup", {"gather_subset": SUBSET})["ansible_facts"]
    caps = _run(tmp_path, "rdmaprov.cluster.host_capabilities",
                {"gather_subset": SUBSET, "preflight": {"connection": "local"}})
    facts = caps["ansible_facts"]
    # Every fact setup gives, with the same value; plus the collection's own two.
    assert _names(facts) == _names(setup) | {"rdmaprov"}
    for name in STABLE:
        if name in setup:
            assert facts[name] == setup[name], name
    assert facts["ansible_os_family"] and "lo" in facts["ansible_interfaces"]
    # The preflight plan saw them: with network facts there is nothing missing to report.
    assert not [e for e in caps["plan"]["errors"] if "network interface facts" in e]
    # Without gather_subset no Ansible fact is gathered.
    bare = _run(tmp_path, "rdmaprov.cluster.host_capabilities", {"rdma": False})["ansible_facts"]
    assert set(bare) == {"rdmaprov"}
