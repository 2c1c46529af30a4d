"""docs/kafka-clients.md stays true to the harness: its table of deliberate differences names exactly the
allow-list's entries, and it names every franz-go test known to fail."""

from __future__ import annotations

import re
from pathlib import Path

from compat_support import DIFFERENCES
from test_franz_go import FAILING

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-clients.md"


def test_differences_table_is_the_allow_list():
    text = DOC.read_text()
    section = text[text.index("### Deliberate differences from Kafka"):]
    section = section[:section.index("\n## ")]
    named = set(re.findall(r"^\| `([a-z-]+)` \|", section, flags=re.M))
    assert named == set(DIFFERENCES), f"docs {sorted(named)} vs allow-list {sorted(DIFFERENCES)}"


def test_franz_go_failures_are_documented():
    text = DOC.read_text()
    assert all(name in text for name in FAILING), [n for n in FAILING if n not in text]
