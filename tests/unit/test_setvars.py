"""rdmaprov.setvars: --write's line-level update of a group_vars file (other lines and comments
kept, refused where the layout cannot be updated that way), and its refusals."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rdmaprov import setvars
from rdmaprov.errors import UserError
from rdmaprov.inventory import Inventory, VarSource


def inv(base: Path, hosts: dict[str, list[str]] | None = None,
        sources: dict[str, list[VarSource]] | None = None) -> Inventory:
    hosts = hosts or {"node1": ["all", "lab"], "node2": ["all", "lab"]}
    return Inventory(path=base / "hosts.ini", hosts=sorted(hosts), selected=sorted(hosts),
                     base=base, groups=hosts, sources=sources or {h: [] for h in hosts})


def plan(tmp_path: Path, text: str | None, settings: dict[str, Any],
         name: str = "group_vars/all.yml") -> setvars.WritePlan:
    target = tmp_path / name
    if text is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return setvars.plan_write(target, settings, inv(tmp_path))


@pytest.mark.parametrize(("before", "settings", "after"), [
    # A one-line value keeps its comment; the lines around it stay as they are.
    ("---\n# fleet\nnet_mtu_default: 9000  # fabric\n# qos\nroce_qos_dscp: 26\n",
     {"net_mtu_default": 4000},
     "---\n# fleet\nnet_mtu_default: 4000  # fabric\n# qos\nroce_qos_dscp: 26\n"),
    # A block list is replaced whole, up to the next key's comment.
    ("net_mtu_interfaces:\n  - name: eth1\n    mtu: 9000\n\n# safety\nnet_mtu_verify: true\n",
     {"net_mtu_interfaces": [{"name": "eth2"}]},
     "net_mtu_interfaces:\n  - name: eth2\n\n# safety\nnet_mtu_verify: true\n"),
    # List items at the key's own column stay there.
    ("roce_qos_interfaces:\n- eth1\n- eth2\nroce_qos_dscp: 26\n",
     {"roce_qos_interfaces": ["eth3"]}, "roce_qos_interfaces:\n- eth3\nroce_qos_dscp: 26\n"),
    ("roce_qos_dscp: 26\n", {"roce_qos_interfaces": ["eth3"]},
     "roce_qos_dscp: 26\nroce_qos_interfaces:\n  - eth3\n"),
    # A name the file lacks is added at its end; a file that lacks a last newline gets one.
    ("roce_qos_dscp: 26", {"net_mtu_default": 4000}, "roce_qos_dscp: 26\nnet_mtu_default: 4000\n"),
    (None, {"net_mtu_default": 4000}, "---\nnet_mtu_default: 4000\n"),
])
def test_the_file_changes_in_the_lines_of_the_value_only(tmp_path: Path, before: str | None,
                                                         settings: dict, after: str) -> None:
    p = plan(tmp_path, before, settings)
    assert p.after == after and p.changes
    assert setvars.apply_write(p).endswith("recorded " + ", ".join(settings))
    assert (tmp_path / "group_vars" / "all.yml").read_text() == after
    again = plan(tmp_path, None, settings)
    assert not again.changes and "unchanged" in setvars.apply_write(again)


@pytest.mark.parametrize(("text", "message"), [
    ("$ANSIBLE_VAULT;1.1;AES256\n6162\n", "encrypted with ansible-vault"),
    ("- 1\n", "not a mapping of variables (list)"),
    ("a: [1\n", "not valid YAML (line 2"),
    # Another value refers to the one replaced: no line-level update keeps that.
    ("net_mtu_default: &m 9000\nother: *m\n", "its layout cannot be updated line by line"),
    ("{net_mtu_default: 9000}\n", "its layout cannot be updated line by line"),
    ("a: 1\na: 2\n", "not valid YAML (line 2: found duplicate mapping key 'a'"),
])
def test_a_file_that_cannot_be_updated_is_refused(tmp_path: Path, text: str,
                                                  message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        plan(tmp_path, text, {"net_mtu_default": 4000})
    assert (tmp_path / "group_vars" / "all.yml").read_text() == text


def test_a_file_that_changed_during_the_run_is_not_written(tmp_path: Path) -> None:
    p = plan(tmp_path, "net_mtu_default: 9000\n", {"net_mtu_default": 4000})
    (tmp_path / "group_vars" / "all.yml").write_text("net_mtu_default: 1500\n")
    with pytest.raises(UserError, match="changed during the run; not written"):
        setvars.apply_write(p)


def test_a_group_that_outranks_the_file_is_named(tmp_path: Path) -> None:
    lab = tmp_path / "group_vars" / "lab.yml"
    chain = [VarSource("group_vars/lab.yml", {"net_mtu_default": 9000}, path=lab, group="lab")]
    with pytest.raises(UserError, match=re.escape("node1 would still get net_mtu_default=9000 "
                                                  "from group_vars/lab.yml, which outranks it")):
        setvars.plan_write(tmp_path / "group_vars" / "all.yml", {"net_mtu_default": 4000},
                           inv(tmp_path, {"node1": ["all", "lab"]}, {"node1": chain}))
    jinja = [VarSource("host_vars/node1.yml", {"net_mtu_default": "{{ mtu }}"},
                       path=tmp_path / "host_vars" / "node1.yml")]
    with pytest.raises(UserError, match=re.escape("node1 would still get net_mtu_default=(a "
                                                  "Jinja or vault value) from host_vars/node1")):
        setvars.plan_write(tmp_path / "group_vars" / "all.yml", {"net_mtu_default": 4000},
                           inv(tmp_path, {"node1": ["all", "lab"]}, {"node1": jinja}))
    # The same value above it, or -e: nothing to fear from the next bootstrap.
    same = [VarSource("group_vars/lab.yml", {"net_mtu_default": 4000}, path=lab, group="lab"),
            VarSource("-e", {"net_mtu_default": 1}, extra=True)]
    setvars.plan_write(tmp_path / "group_vars" / "all.yml", {"net_mtu_default": 4000},
                       inv(tmp_path, {"node1": ["all", "lab"]}, {"node1": same}))
    # A group's own file is above all.yml, below host_vars.
    setvars.plan_write(lab, {"net_mtu_default": 4000},
                       inv(tmp_path, {"node1": ["all", "lab"]}, {"node1": chain}))
