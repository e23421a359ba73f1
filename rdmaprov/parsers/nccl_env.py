"""NCCL environment variables in a log or a pasted command line, as findings for explain.

Which names exist, are deprecated, removed or never existed is the collection's
``nccl_names`` (module_utils, stdlib only): the rdma_facts module and `rdmaprov probe` lint with
the same data and the same rule.
"""

from __future__ import annotations

import re

from rdmaprov.collection import nccl_names as _names
from rdmaprov.parsers._common import Finding

KNOWN = _names.KNOWN
DEPRECATED = _names.DEPRECATED
REMOVED = _names.REMOVED
vtuple = _names.vtuple

# "NCCL_X=value" in a pasted command line or environment dump ("-x NCCL_X=1", "export ...").
ASSIGN = re.compile(r"(?<![\w$])(NCCL_[A-Z0-9_]+)=(\S*)")


def lint(env: dict[str, str], version: str | None) -> list[Finding]:
    """Bogus, deprecated, removed and misspelled NCCL variables among ``env`` (name -> value),
    judged against the log's NCCL ``version`` when it has one."""
    return [Finding(d["level"], d["message"], d["fix"], d["code"])
            for d in _names.name_findings(env, version)]
