"""How much of the roles' task, vars and handler text is Jinja, and how many filters the
collection publishes (issue 28's two counts), for a tree or a commit.

Jinja is counted in characters: every ``{{ ... }}`` and ``{% ... %}`` span, plus the bare
expressions of ``when``, ``that``, ``until``, ``changed_when``, ``failed_when``, ``loop``,
``with_items``, ``retries`` and ``delay`` (Ansible templates those without braces). Text is
every character of roles/*/{tasks,vars,handlers}/*.yml. Templates (templates/*.j2) are not
counted: they are files rendered for a host, not logic.

    python3 bench/jinja_share.py            # this checkout
    python3 bench/jinja_share.py 968d8b7    # a commit (read with git show, nothing checked out)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPANS = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
BARE = re.compile(r"^\s*(?:-\s*)?(?:when|that|until|changed_when|failed_when|loop|with_items|"
                  r"retries|delay)\s*:\s*(.*)$", re.M)
FILTERS = re.compile(r"def filters\(self\):.*?return\s*\{(.*?)\}", re.S)


def files(rev: str | None) -> dict[str, str]:
    """path -> text of the role YAML and filter plugins, in the checkout or at ``rev``."""
    if rev is None:
        paths = [p for pat in ("roles/*/tasks/*.yml", "roles/*/vars/*.yml",
                               "roles/*/handlers/*.yml", "plugins/filter/*.py")
                 for p in ROOT.glob(pat)]
        return {str(p.relative_to(ROOT)): p.read_text() for p in paths}
    names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev],
                           capture_output=True, text=True, check=True).stdout.split()
    wanted = re.compile(r"^(roles/[^/]+/(tasks|vars|handlers)/[^/]+\.yml"
                        r"|plugins/filter/[^/]+\.py)$")
    return {n: subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{n}"], capture_output=True,
                              text=True, check=True).stdout for n in names if wanted.match(n)}


def jinja_chars(text: str) -> int:
    n = sum(len(m) for m in SPANS.findall(text))
    return n + sum(len(s) for s in BARE.findall(text) if "{{" not in s)


def main(argv: list[str]) -> int:
    rev = argv[1] if len(argv) > 1 else None
    texts = files(rev)
    per: dict[str, list[int]] = {}
    for path, text in texts.items():
        if path.startswith("roles/"):
            role = path.split("/")[1]
            per.setdefault(role, [0, 0])
            per[role][0] += jinja_chars(text)
            per[role][1] += len(text)
    jinja = sum(a for a, _ in per.values())
    total = sum(b for _, b in per.values())
    names = sorted(n for path, text in texts.items() if path.startswith("plugins/filter/")
                   for m in FILTERS.finditer(text) for n in re.findall(r"['\"](\w+)['\"]\s*:",
                                                                        m.group(1)))
    print(f"{rev or 'checkout'}: Jinja {jinja} of {total} characters ({jinja / total:.1%}); "
          f"{len(names)} filters: {', '.join(names)}")
    for role, (a, b) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        print(f"  {role:18} {a:6} / {b:6}  {a / b:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
