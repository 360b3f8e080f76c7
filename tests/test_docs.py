"""The README and the guides are for users: no issue numbers or round talk, no paths of a developer's machine, and
every relative link resolves to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
HISTORY = re.compile(r"\bissues? #?[0-9]|\bthis round\b", re.IGNORECASE)
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|tmp|home|root|Users)/")
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_a_guide_holds_no_history_and_no_machine_paths(doc):
    text = doc.read_text(encoding="utf-8")
    found = [f"{doc.name}:{n}: {line.strip()[:80]}" for n, line in enumerate(text.splitlines(), 1)
             if HISTORY.search(line) or MACHINE_PATH.search(line)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    broken = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor in the same page
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{doc.name}: links to nothing: {broken}"


def test_the_checks_can_fail():
    assert HISTORY.search("as measured in issue 29") and HISTORY.search("This round we")
    assert MACHINE_PATH.search("see /work/main/x") and not MACHINE_PATH.search("a/work/b or ./tmp/x")
    assert LINK.findall("[a](docs/x.md#y) [b](https://e.org)") == ["docs/x.md#y", "https://e.org"]
