# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The SSH session a module runs in, read in one place: sshd's SSH_CONNECTION."""

from __future__ import annotations

import os


def endpoints(value=None):
    """(client_ip, server_ip) of the session: sshd sets SSH_CONNECTION to "client_ip
    client_port server_ip server_port". (None, None) when it is unset or not of that form (a
    local connection, su/sudo without it). ``value`` defaults to this process's environment."""
    parts = (os.environ.get("SSH_CONNECTION", "") if value is None else str(value)).split()
    if len(parts) != 4:
        return None, None
    return parts[0], parts[2]
