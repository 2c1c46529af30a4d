"""npm packages the tests run against lakelog (kafkajs and its codecs), installed into the reference cache.

``reference/npm/package.json`` names exact versions and ``package-lock.json`` pins every package by its integrity
hash; :func:`install` runs ``npm ci`` on a copy of both in ``<cache>/npm/<digest of the lock>/``, so a changed lock
installs anew beside the old one and a fresh clone reuses what an earlier one installed. Install scripts do not run
(npm's default here): the LZ4 codec's native ``lz4`` module is then absent and it uses its JavaScript
implementation. Tests put :func:`node_modules` on ``NODE_PATH``; nothing installs at test time.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from reference import maven

HERE = Path(__file__).resolve().parent / "npm"
INSTALL_COMMAND = ".venv/bin/python -m reference peers"


def _prefix() -> Path:
    digest = hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()[:16]
    return maven.cache_dir() / "npm" / digest


def node_modules() -> Path:
    """The installed ``node_modules``; raises ReferenceMissing naming the install command when it is absent."""
    path = _prefix() / "node_modules"
    if not (_prefix() / ".installed").exists():
        raise maven.ReferenceMissing(f"the reference npm packages are not installed ({path}); run: "
                                     f"{INSTALL_COMMAND}")
    return path


def node() -> str:
    return maven.executable("node", "kafkajs runs on Node.js")


def install(*, log=print) -> bool:
    """``npm ci`` the pinned packages unless installed; returns whether it installed. Raises RuntimeError with
    npm's output when it fails."""
    prefix = _prefix()
    if (prefix / ".installed").exists():
        return False
    npm = maven.executable("npm", "the reference npm packages install with it")
    prefix.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(HERE / name, prefix / name)
    log(f"installing the reference npm packages into {prefix}")
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=prefix,
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"npm ci in {prefix} failed:\n{done.stdout}{done.stderr}")
    (prefix / ".installed").touch()
    return True
