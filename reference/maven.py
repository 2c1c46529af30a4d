"""Pinned Maven artifacts for the tests' and benchmarks' references: fetched from Maven Central, checked, cached.

``maven.lock`` lists, per set of ``sets.toml``, every jar by its repository path and SHA-256. :func:`fetch`
downloads what the cache lacks and verifies every file; :func:`classpath` gives a set's jars and raises
:class:`ReferenceMissing` (naming the command to run) when any is absent, so a test or benchmark never fetches at
run time and never runs without its reference. :func:`lock` regenerates the lock with Maven (development only).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = HERE / "sets.toml"
LOCK = HERE / "maven.lock"
CENTRAL = os.environ.get("LAKELOG_MAVEN_REPOSITORY", "https://repo1.maven.org/maven2")
FETCH_COMMAND = ".venv/bin/python -m reference fetch"


class ReferenceMissing(RuntimeError):
    """A reference artifact is not in the cache: run the fetch step (``make test`` runs it)."""


def executable(name: str, why: str) -> str:
    """The path of ``name`` on PATH; raises ReferenceMissing saying ``why`` it is needed when it is absent."""
    exe = shutil.which(name)
    if not exe:
        raise ReferenceMissing(f"no `{name}` on PATH ({why})")
    return exe


@dataclass(frozen=True)
class Artifact:
    set: str
    path: str  # the repository layout path, e.g. org/apache/kafka/kafka_2.13/4.1.1/kafka_2.13-4.1.1.jar
    sha256: str

    @property
    def url(self) -> str:
        return f"{CENTRAL}/{self.path}"


def cache_dir() -> Path:
    """Where artifacts live: ``$LAKELOG_REFERENCE_CACHE``, else ``$XDG_CACHE_HOME/lakelog/reference``
    (``~/.cache/...``): outside the checkout, so a fresh clone reuses what an earlier one fetched."""
    env = os.environ.get("LAKELOG_REFERENCE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lakelog" / "reference"


def set_names() -> list[str]:
    return sorted(tomllib.loads(SETS.read_text())["sets"])


def locked(sets: list[str] | None = None) -> list[Artifact]:
    """The lock's artifacts of ``sets`` (all when None); raises KeyError for a set the lock lacks."""
    rows = []
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, path, digest = line.split("\t")
            rows.append(Artifact(name, path, digest))
    if sets is not None:
        unknown = set(sets) - {a.set for a in rows}
        if unknown:
            raise KeyError(f"no such reference set in {LOCK.name}: {', '.join(sorted(unknown))}")
        rows = [a for a in rows if a.set in sets]
    return rows


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(sets: list[str] | None = None, *, log=print) -> int:
    """Download every artifact of ``sets`` the cache lacks (or holds with the wrong digest); returns how many were
    downloaded. Raises RuntimeError naming the URL when a download fails or its digest differs from the lock."""
    root = cache_dir() / "maven"
    fetched = 0
    for a in locked(sets):
        target = root / a.path
        if target.exists() and _sha256(target) == a.sha256:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        log(f"fetching {a.url}")
        tmp = target.with_suffix(target.suffix + ".part")
        try:
            with urllib.request.urlopen(a.url, timeout=120) as r, tmp.open("wb") as out:
                shutil.copyfileobj(r, out, 1 << 20)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"cannot fetch {a.url}: {e}") from None
        digest = _sha256(tmp)
        if digest != a.sha256:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"{a.url}: SHA-256 {digest} where {LOCK.name} pins {a.sha256}")
        tmp.replace(target)
        fetched += 1
    return fetched


def jars(set_name: str) -> list[Path]:
    """The cached jars of one set; raises ReferenceMissing naming the fetch command when any is absent."""
    root = cache_dir() / "maven"
    paths = [root / a.path for a in locked([set_name])]
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise ReferenceMissing(f"reference set {set_name!r} is not fetched ({len(missing)} of {len(paths)} jars "
                               f"missing, e.g. {missing[0].name}); run: {FETCH_COMMAND} {set_name}")
    return paths


def classpath(*set_names: str) -> str:
    """A Java class path of the named sets' jars (the first set's jars first)."""
    seen: dict[str, None] = {}
    for name in set_names:
        for p in jars(name):
            seen.setdefault(str(p))
    return os.pathsep.join(seen)


def _pyspark_artifacts() -> set[str]:
    """The artifact ids of the jars the installed pyspark ships (``scala-library-2.13.17.jar`` -> ``scala-library``)."""
    import pyspark

    names = (p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    return {m.group(1) if (m := re.match(r"^(.*)-\d[^_]*\.jar$", n)) else n for n in names}


def lock(sets: list[str] | None = None, *, log=print) -> None:
    """Resolve ``sets`` (all when None) with Maven into ``maven.lock``, keeping the other sets' rows."""
    spec = tomllib.loads(SETS.read_text())["sets"]
    names = sorted(spec) if sets is None else sets
    keep = [a for a in locked() if a.set not in names] if LOCK.exists() else []
    rows = [(a.set, a.path, a.sha256) for a in keep]
    provided = None
    for name in names:
        entry = spec[name]
        deps = "".join(
            "<dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"
            .format(*c.split(":")) for c in entry["coordinates"])
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "pom.xml").write_text(
                '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
                f"<groupId>lakelog.reference</groupId><artifactId>{name}</artifactId><version>0</version>"
                f"<dependencies>{deps}</dependencies></project>")
            log(f"resolving {name} with Maven")
            subprocess.run(["mvn", "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime",
                            "-Dmdep.useRepositoryLayout=true", "-DoutputDirectory=libs"], cwd=tmp, check=True)
            libs = Path(tmp, "libs")
            for jar in sorted(libs.rglob("*.jar")):
                rel = jar.relative_to(libs).as_posix()
                if entry.get("beside_pyspark"):
                    provided = _pyspark_artifacts() if provided is None else provided
                    if jar.parent.parent.name in provided:  # <group path>/<artifact>/<version>/<file>
                        continue
                rows.append((name, rel, _sha256(jar)))
    rows.sort()
    LOCK.write_text("# set\trepository path\tsha256 -- written by `python -m reference lock`; read by fetch\n"
                    + "".join("\t".join(r) + "\n" for r in rows))
