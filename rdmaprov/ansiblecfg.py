"""The ansible.cfg a run reads: the one ansible-playbook would read if started where rdmaprov
was started.

Ansible's own search (``ansible.config.manager.find_ini_config_file``), first found wins:

1. ``$ANSIBLE_CONFIG`` (a file, or a directory holding ``ansible.cfg``);
2. ``./ansible.cfg`` in the current directory, unless that directory is world-writable;
3. ``~/.ansible.cfg``;
4. ``/etc/ansible/ansible.cfg``.

The input check parses the inventory in this process, where Ansible's configuration already
comes from that file; the engine hands the same file to ansible-playbook with ``ANSIBLE_CONFIG``
(ansible-runner starts it in another directory, where ``./ansible.cfg`` would not be found).
rdmaprov's own settings (rdmaprov.settings) are environment variables and outrank the file;
everything else in it (inventory plugins, vault, SSH options, roles paths) applies.
"""

from __future__ import annotations

from pathlib import Path


def find() -> Path | None:
    """The ansible.cfg ansible-playbook would read here, or None."""
    from ansible.config.manager import find_ini_config_file

    found = find_ini_config_file()
    return Path(found).resolve() if found else None
