"""The package map in docs/architecture.md is true: it names every package, and imports only run up it.

Every import of the code (module level or inside a function) counts; an import of the top-level
``lakelog`` package (its lazy ``Log``, ``KafkaError``, ... exports) counts as none.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("lakelog", "api", "kafka_front", "jobs", "bench")


def map_entries() -> list[str]:
    """The map's entries in order: ``lakelog/storage`` for a folder, ``lakelog/log.py`` for a module."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = re.search(r"## Package map\n.*?```\n(.*?)```", text, flags=re.S)
    assert block, "docs/architecture.md lost its package map"
    return [line.split()[0].rstrip("/") for line in block.group(1).splitlines() if line and not line[0].isspace()]


def packages() -> list[str]:
    """Every package of the code, as paths: lakelog's subpackages and the top-level packages beside it."""
    found = [str(p.parent.relative_to(REPO)) for p in (REPO / "lakelog").glob("*/__init__.py")]
    return sorted(found + [name for name in TOP_LEVEL[1:] if (REPO / name / "__init__.py").exists()])


def entry_of(module: str, entries: list[str]) -> str | None:
    """The map entry that holds ``module`` (dotted), or None for the top-level ``lakelog`` package."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n])
        if path in entries or f"{path}.py" in entries:
            return path if path in entries else f"{path}.py"
    return None


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n.split(".")[0] in TOP_LEVEL}


def test_map_names_every_package():
    entries = map_entries()
    missing = [p for p in packages() if p not in entries]
    assert not missing, f"docs/architecture.md's package map does not name {missing}"
    stale = [e for e in entries if not (REPO / e).exists()]
    assert not stale, f"the package map names what does not exist: {stale}"


def test_imports_only_run_up_the_map():
    entries = map_entries()
    rank = {e: i for i, e in enumerate(entries)}
    wrong = []
    for top in TOP_LEVEL:
        for path in (REPO / top).rglob("*.py"):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            if module == "lakelog.__init__":
                continue  # the public entry point: lazy re-exports of names from the entries
            here = entry_of(module, entries)
            assert here is not None, f"{path.relative_to(REPO)} is in no entry of the package map"
            for imported in imports_of(path):
                there = entry_of(imported, entries)
                if there is not None and there != here and rank[there] > rank[here]:
                    wrong.append(f"{path.relative_to(REPO)} imports {imported} ({there} is below {here})")
    assert not wrong, "imports that run down the package map (an import circle in the making):\n" + "\n".join(wrong)


def test_no_private_names_across_packages():
    entries = map_entries()
    wrong = []
    for top in TOP_LEVEL:
        for path in (REPO / top).rglob("*.py"):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in TOP_LEVEL:
                    private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                    if private and entry_of(node.module, entries) != entry_of(module, entries):
                        wrong.append(f"{path.relative_to(REPO)}: from {node.module} import {', '.join(private)}")
    assert not wrong, "private names imported from another package:\n" + "\n".join(wrong)
