"""``/docs`` renders in a real headless browser with no internet: Swagger UI's assets come from the front.

Chromium (Debian's ``chromium``; ``.ci/run`` installs it) loads the page with every host but 127.0.0.1
unresolvable, runs its JavaScript and dumps the DOM, which must hold the rendered operations.
"""

from __future__ import annotations

import shutil
import subprocess

from front_process import Front

OFFLINE = "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Chromium is missing: .ci/run installs Debian's chromium (apt-get install chromium)"
    return path


def headless(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
                           f"--host-resolver-rules={OFFLINE}", *args, url], capture_output=True, text=True,
                          timeout=120)


def test_swagger_ui_renders_offline(tmp_path):
    front = Front(str(tmp_path / "root"), tmp_path).start()
    try:
        dom = headless(f"{front.url}/docs", "--dump-dom").stdout
        assert dom.count('class="opblock ') >= 10, dom[:2000]  # the operations were rendered by Swagger UI's JS
        for path in ("/v1/topics/{topic}/records", "/v1/groups/{group}/offsets"):
            assert path in dom
        assert "cdn.jsdelivr.net" not in dom and "unpkg.com" not in dom
        shot = tmp_path / "docs.png"
        headless(f"{front.url}/docs", f"--screenshot={shot}", "--window-size=1280,900")
        assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
    finally:
        front.stop()
