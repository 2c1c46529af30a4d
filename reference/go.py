"""franz-go's ``kgo`` integration tests, from the Go module proxy, built once into a test binary in the cache.

The tests come from the pinned module (:data:`MODULE` at :data:`VERSION`, checked against :data:`MODULE_SUM`, the
``h1:`` hash the Go checksum database records for it). ``go mod download`` puts the module in Go's read-only module
cache; :func:`build_kgo_tests` copies it to a writable directory under ``<cache>/go/`` and runs ``go test -c
./pkg/kgo`` there (its dependencies come from the proxy too, checked against the module's own go.sum). A test runs
the binary in the package's source directory (one test reads config.go) with ``KGO_SEEDS`` pointing at the broker
under test; nothing builds at test time.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from reference import maven

MODULE = "github.com/twmb/franz-go"
VERSION = "v1.22.3"
MODULE_SUM = "h1:RHe35s34pKefMLyL+ZYJ6mQVtfFZz4zHDHVkTyACur0="
BUILD_COMMAND = ".venv/bin/python -m reference peers"


def _root() -> Path:
    return maven.cache_dir() / "go" / f"franz-go@{VERSION}"


def kgo_test_binary() -> Path:
    """Where the built ``kgo`` test binary lives (it may not exist yet)."""
    return _root() / "kgo.test"


def kgo_package_dir() -> Path:
    """The ``pkg/kgo`` sources the binary was built from: the directory to run it in."""
    return _root() / "src" / "pkg" / "kgo"


def require_kgo_tests() -> Path:
    """The built binary; raises ReferenceMissing naming the build command when it is absent."""
    path = kgo_test_binary()
    if not path.exists() or not kgo_package_dir().exists():
        raise maven.ReferenceMissing(f"franz-go {VERSION}'s kgo test binary is not built ({path}); run: "
                                     f"{BUILD_COMMAND}")
    return path


def _go() -> str:
    return maven.executable("go", "franz-go's tests are built with Go")


def _make_writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def build_kgo_tests(*, log=print) -> bool:
    """Build the test binary unless it is cached; returns whether it was built. Raises RuntimeError when the
    module's hash differs from :data:`MODULE_SUM` or the build fails (with Go's output)."""
    target = kgo_test_binary()
    if target.exists() and kgo_package_dir().exists():
        return False
    go = _go()
    env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false"}
    log(f"downloading {MODULE}@{VERSION} from the Go module proxy")
    got = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{VERSION}"], capture_output=True, text=True,
                         env=env, cwd=tempfile.gettempdir(), timeout=600)
    if got.returncode != 0:
        raise RuntimeError(f"go mod download {MODULE}@{VERSION} failed:\n{got.stdout}{got.stderr}")
    info = json.loads(got.stdout)
    if info.get("Sum") != MODULE_SUM:
        raise RuntimeError(f"{MODULE}@{VERSION}: module hash {info.get('Sum')} where reference/go.py pins "
                           f"{MODULE_SUM}")
    root = _root()
    src = root / "src"
    if src.exists():
        shutil.rmtree(src)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(info["Dir"], src, symlinks=True)
    _make_writable(src)
    log(f"building franz-go's kgo tests (go test -c ./pkg/kgo: a few minutes)")
    part = target.with_suffix(".part")
    built = subprocess.run([go, "test", "-c", "-o", str(part), "./pkg/kgo"], cwd=src, env=env,
                           capture_output=True, text=True, timeout=1800)
    if built.returncode != 0:
        part.unlink(missing_ok=True)
        raise RuntimeError(f"go test -c ./pkg/kgo failed:\n{built.stdout}{built.stderr}")
    part.replace(target)
    return True
