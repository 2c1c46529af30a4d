"""The package map in docs/architecture.md is true: it names every package, and imports only run up it.

Every import of the code (module level or inside a function) counts; an import of the top-level
``lakelog`` package (its lazy ``Log``, ``KafkaError``, ... exports) counts as none.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("lakelog", "api", "kafka_front", "jobs", "bench")


def map_entries() -> list[str]:
    """The map's entries in order: ``lakelog/storage`` for a folder, ``lakelog/log.py`` for a module."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = re.search(r"## Package map\n.*?```(?:text)?\n(.*?)```", text, flags=re.S)
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


@functools.cache
def syntax_tree(path: Path) -> ast.Module:
    """``path`` parsed once for all the checks of this module."""
    return ast.parse(path.read_text())


def imports_of(path: Path) -> set[str]:
    tree = syntax_tree(path)
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


def private_names(tree: ast.Module, module: str, entries: list[str]) -> list[str]:
    """Another map entry's private names that ``tree`` (the code of ``module``) uses: ``from a.b import _x``, and
    ``m._x`` for ``m`` an imported module or name of the code."""
    here = entry_of(module, entries)
    found = []
    imported: dict[str, str] = {}  # local name -> what it names, dotted
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in TOP_LEVEL:
                continue
            imported.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            if private and entry_of(node.module, entries) != here:
                found.append(f"from {node.module} import {', '.join(private)}")
        elif isinstance(node, ast.Import):
            imported.update({a.asname: a.name for a in node.names if a.asname and a.name.split(".")[0] in TOP_LEVEL})
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported
                and node.attr.startswith("_") and not node.attr.startswith("__")
                and entry_of(imported[node.value.id], entries) != here):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_private_names_are_found():
    entries = ["lakelog/storage", "lakelog/writer"]
    uses = private_names(ast.parse("from lakelog.storage.delta_log import _x, y\n"
                         "import lakelog.storage.delta_log as dl\n"
                         "from lakelog.storage import delta_log\n"
                         "from lakelog.writer import committer\n"
                         "dl._a, delta_log._b, delta_log.c, committer._d, delta_log.__name__\n"),
                         "lakelog.writer.committer_front", entries)
    assert uses == ["from lakelog.storage.delta_log import _x", "dl._a", "delta_log._b"]
    assert private_names(ast.parse("from lakelog.storage.delta_log import _x\n"), "lakelog.storage.catalog",
                         entries) == []


def test_no_private_names_across_packages():
    entries = map_entries()
    wrong = []
    for top in TOP_LEVEL:
        for path in (REPO / top).rglob("*.py"):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            wrong.extend(f"{path.relative_to(REPO)}: {use}" for use in private_names(syntax_tree(path), module, entries))
    assert not wrong, "private names imported from another package:\n" + "\n".join(wrong)


FRONTS = ("api", "kafka_front")


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports when it runs (at module level or inside functions):
    ``from X import Y`` imports the submodule ``X.Y`` if there is one, else ``X``. Imports under
    ``if TYPE_CHECKING:`` are for type checkers only and do not count."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit_one(other)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                names.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        visit(node)

    visit(syntax_tree(path))
    return names & modules


def module_files() -> dict[str, Path]:
    """Every module of the code by dotted name (a package by its own name, for its ``__init__.py``)."""
    out = {}
    for top in TOP_LEVEL:
        for path in (REPO / top).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_fronts_never_import_each_other():
    """``api/`` and ``kafka_front/`` share the broker layer (``lakelog/broker``), never each other's modules,
    not even for types; the broker layer and the library import neither front (only ``lakelog.cli``, which
    starts them)."""
    wrong = []
    for name, path in module_files().items():
        top = name.split(".")[0]
        if name.startswith("lakelog.cli"):
            continue
        forbidden = {f for f in FRONTS if f != top} if top in FRONTS else set(FRONTS) if top == "lakelog" else set()
        for imported in imports_of(path):
            if imported.split(".")[0] in forbidden:
                wrong.append(f"{path.relative_to(REPO)} imports {imported}")
    assert not wrong, "a front imported by the other front or by the library:\n" + "\n".join(wrong)


def test_no_import_cycles():
    """No module reaches itself through runtime imports (Tarjan's strongly connected components over every
    module of the code; a type-only import under ``TYPE_CHECKING`` is no edge)."""
    files = module_files()
    graph = {name: sorted(i for i in runtime_imports(path, set(files)) if i != name and i != "lakelog")
             for name, path in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in graph:  # iterative Tarjan: the graph is deeper than Python's recursion limit allows for
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    assert not cycles, "import circles (modules that import each other at run time):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


WEB_STACK = ("fastapi", "starlette", "uvicorn")
SPARK_SIDE = ("lakelog.spark", "lakelog.maintenance", "lakelog.demo")  # jobs and the source


def test_lakelog_imports_without_the_fronts_web_stack():
    """The library and the broker layer are usable without the HTTP front or Spark: no module of ``lakelog/``
    imports FastAPI, Starlette or uvicorn (but ``lakelog serve``, inside the command), every module imports with
    those absent, and only the Spark side needs PySpark to import."""
    import subprocess
    import sys

    files = {n: p for n, p in module_files().items() if n.split(".")[0] == "lakelog"}
    direct = [f"{p.relative_to(REPO)} imports {i}" for n, p in files.items() for i in imports_of_any(p)
              if i.split(".")[0] in WEB_STACK and not n.startswith("lakelog.cli")]  # the CLI starts the fronts
    assert not direct, "\n".join(direct)
    modules = sorted(n for n in files if not n.endswith("__main__"))
    script = f"""
import importlib, importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {WEB_STACK + ("pyspark",)!r}:
            raise ModuleNotFoundError(f"{{name}} is absent in this test", name=name)
sys.meta_path.insert(0, Absent())
for name in {modules!r}:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("pyspark"):
            raise
        print("needs pyspark:", name)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.endswith("ok\n"), done.stderr[-3000:]
    spark = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("needs pyspark:")]
    assert [m for m in spark if not m.startswith(SPARK_SIDE)] == [], "modules outside the Spark side need PySpark"


def imports_of_any(path: Path) -> set[str]:
    """Every module ``path`` names in an import statement, of any package."""
    names: set[str] = set()
    for node in ast.walk(syntax_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


# -- module size ------------------------------------------------------------------------------------------------
MAX_LINES = 500  # a module a reader takes in at one sitting; past it, it holds more than one concept


def test_no_module_of_the_library_is_over_the_line_limit():
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in (REPO / "lakelog").rglob("*.py")}
    over = {path: n for path, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by concern): {over}"


# -- jobs/ ------------------------------------------------------------------------------------------------------
def test_the_jobs_have_one_launcher_and_a_script_each_generated_from_one_table():
    from lakelog.maintenance.job_scripts import SCRIPTS, launcher_source

    jobs = REPO / "jobs"
    scripts = sorted(p.name for p in jobs.glob("*.py") if p.name not in ("__init__.py", "launch.py"))
    assert scripts == sorted(SCRIPTS.values())
    for job, script in SCRIPTS.items():
        assert not (jobs / script).is_symlink() and (jobs / script).read_text() == launcher_source(job), \
            f"jobs/{script} is not what lakelog.maintenance.job_scripts.launcher_source({job!r}) generates"


# -- collaborators ----------------------------------------------------------------------------------------------
def log_attributes_set(tree: ast.Module) -> list[str]:
    """Attributes the code sets on a Log from outside it: ``log.x = ...``, ``self.log.x = ...``,
    ``app.state.log.x += ...`` (a Log takes its collaborators in its constructor)."""
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            if not isinstance(t, ast.Attribute):
                continue
            owner = t.value
            if (isinstance(owner, ast.Name) and owner.id == "log") or (
                    isinstance(owner, ast.Attribute) and owner.attr == "log"):
                found.append(f"{ast.unparse(t)} = ...")
    return found


def test_log_attributes_set_are_found():
    tree = ast.parse("log.forwarder = f\nself.log.on_commit_stages = g\napp.state.log.x += 1\n"
                     "self.log = log\nlog = Log()\nlogger.level = 1\nlog.items[0] = 1\n")
    assert log_attributes_set(tree) == ["log.forwarder = ...", "self.log.on_commit_stages = ...",
                                        "app.state.log.x = ..."]


def test_nothing_sets_a_logs_attributes_from_outside():
    wrong = []
    for top in TOP_LEVEL:
        for path in (REPO / top).rglob("*.py"):
            if path == REPO / "lakelog" / "log.py":
                continue
            wrong.extend(f"{path.relative_to(REPO)}: {use}" for use in log_attributes_set(syntax_tree(path)))
    assert not wrong, "a Log's collaborators go to its constructor, not set from outside:\n" + "\n".join(wrong)


# -- tests/ mirrors the packages -------------------------------------------------------------------------------
# Each folder of tests/ and the package (or top-level folder) whose behaviour it tests; top-level test files are
# those of the top-level modules and of the repository as a whole.
TEST_FOLDERS = {
    "api": "api", "kafka": "kafka_front", "compat": "kafka_front", "broker": "lakelog/broker",
    "storage": "lakelog/storage", "writer": "lakelog/writer", "reader": "lakelog/reader", "cluster": "lakelog/cluster",
    "transaction": "lakelog/transaction", "group": "lakelog/group", "maintenance": "lakelog/maintenance",
    "quota": "lakelog/quota", "schema": "lakelog/schema", "schema_registry": "lakelog/schema_registry",
    "security": "lakelog/security", "spark": "lakelog/spark", "cli": "lakelog/cli", "benchmarks": "bench",
}
TOP_LEVEL_TESTS = {"test_log.py": "lakelog/log.py", "test_error_codes.py": "lakelog/errors.py",
                   "test_demo.py": "lakelog/demo.py", "test_docs.py": "docs", "test_layout.py": "docs"}


def test_tests_mirror_the_packages():
    """Every test file sits in the folder of what it tests (TEST_FOLDERS), and each folder's package exists."""
    tests = REPO / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and any(p.rglob("test_*.py"))}
    assert folders == set(TEST_FOLDERS), folders ^ set(TEST_FOLDERS)
    assert {p.name for p in tests.glob("test_*.py")} == set(TOP_LEVEL_TESTS)
    for target in [*TEST_FOLDERS.values(), *TOP_LEVEL_TESTS.values()]:
        assert (REPO / target).exists(), target
