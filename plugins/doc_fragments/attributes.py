# -*- coding: utf-8 -*-
# Copyright: rdmaprov developers
# Apache-2.0
"""The attributes the collection's modules share, once: a module that reads (or acts in one
call and supports check mode without a diff) extends C(rdmaprov.cluster.attributes); one that
runs on the control host as an action adds C(rdmaprov.cluster.attributes.action) (with
C(ansible.builtin.action_common_attributes.flow)). A module declares only an attribute that
differs (C(diff_mode: full) for one that writes files; its own C(check_mode) details): its own
entry wins over a fragment's."""

from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

    ACTION = r"""
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
"""
