"""Helpers of the Chromium tests of the console (Debian's chromium, driven by Playwright; no browser download)."""

from __future__ import annotations

import shutil

# Added to every page: it records the Content-Security-Policy violations it meets (a blocked inline style or
# script), read back with ``page.evaluate("() => window.__csp")``.
RECORD_CSP = """window.__csp = []; document.addEventListener('securitypolicyviolation',
    e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Chromium is missing: .ci/run installs Debian's chromium (apt-get install chromium)"
    return path
