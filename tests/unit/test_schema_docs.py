"""The report schema's version is written in one place (report.SCHEMA); every doc and docstring
that names a version names that one."""

from __future__ import annotations

import re
from pathlib import Path

from rdmaprov.validate.report import SCHEMA

ROOT = Path(__file__).resolve().parents[2]


def test_every_named_report_schema_version_is_the_codes() -> None:
    named = {}
    for f in [*ROOT.glob("docs/*.md"), ROOT / "README.md", *ROOT.glob("rdmaprov/**/*.py")]:
        for m in re.finditer(r"rdmaprov\.validate\.report/\d+", f.read_text()):
            named.setdefault(m[0], []).append(str(f.relative_to(ROOT)))
    assert SCHEMA in named  # docs/validate.md lists its fields
    assert set(named) == {SCHEMA}, named
