"""The NCCL release table: sourced entries, version comparison, the rules that quote it."""

from __future__ import annotations

import re

from rdmaprov.parsers import rules
from rdmaprov.parsers.nccl_releases import FIXES, fixed_text, has_fix, version_tuple


def test_every_entry_is_a_release_with_its_notes_and_threads() -> None:
    for key, f in FIXES.items():
        assert re.fullmatch(r"2\.\d+\.\d+", f.fixed_in), key
        assert f.source.endswith(f"/v{f.fixed_in}-1"), key
        assert f.note and all(t.startswith("https://github.com/") for t in f.threads), key
        assert f.fixed_in in fixed_text(key) and f.note in fixed_text(key)


def test_every_entry_is_quoted_by_a_rule() -> None:
    text = " ".join(r.action for r in rules.RULES) + " " + rules._SHORT_MAGIC
    for f in FIXES.values():
        assert f.note in text, f.key


def test_versions_compare_as_numbers() -> None:
    assert version_tuple("2.25.1+cuda12.8") == (2, 25, 1)
    assert version_tuple("v?") is None and version_tuple(None) is None
    assert has_fix("blackwell_shared_mem", "2.25.1") is False
    assert has_fix("blackwell_shared_mem", "2.26.2") is True
    assert has_fix("blackwell_shared_mem", "2.100.0") is True  # not a string comparison
    assert has_fix("blackwell_shared_mem", None) is None


def test_the_2_26_warn_wording_is_not_the_2_25_bug() -> None:
    # 2.26.2+ (enqueue.cc) words a real mismatch "cudaArch %d ncclMaxSharedMem %d exceeds ...".
    assert rules.match("cudaArch 1200 ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem "
                       "79856", "nccl") is None
    hit = rules.match("ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856", "nccl")
    assert hit is not None and hit[0].code == "nccl_known_bug"
