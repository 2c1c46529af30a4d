"""Cross-site request forgery against the console, in Chromium: pages served from another site
(``http://evil.example:PORT``, resolved to loopback by the browser) and from another port of 127.0.0.1 (the
same site: ``SameSite=Strict`` cookies are sent) submit plain HTML forms and ``no-cors`` fetches to the
console's actions -- produce, create, delete, set a config, reset offsets.  On an open front and on a front
with an auth file whose user is logged in, every one is refused with 403 and nothing changes; the console's
own forms, in the same browser, still work.

Without a browser: a form POST carrying the session cookie but not its token, or another session's token,
is refused; every console answer carries ``nosniff`` and the Content-Security-Policy.
"""

from __future__ import annotations

import html
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from browser_support import RECORD_CSP, chromium
from front_process import Front

ADMIN = "csrf-admin-secret"
AUTH = {"tokens": [{"principal": "User:admin", "token": ADMIN}], "super_users": ["User:admin"], "acls": []}


class Attacker:
    """An HTTP server on 127.0.0.1 serving the pages put in ``pages`` (path -> HTML)."""

    def __init__(self) -> None:
        pages = self.pages = {}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = pages.get(self.path.split("?")[0], "not here").encode()
                self.send_response(200 if self.path in pages else 404)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def form_page(action: str, fields: dict[str, str]) -> str:
    """A page that submits a plain HTML form to ``action`` as soon as it loads."""
    inputs = "".join(f'<input name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items())
    return (f'<!doctype html><form id="f" method="post" action="{html.escape(action)}">{inputs}</form>'
            f'<script>document.getElementById("f").submit()</script>')


def fetch_page(action: str, fields: dict[str, str]) -> str:
    """A page that sends the same POST with ``fetch`` (``no-cors``, cookies included); it reports when done."""
    body = "&".join(f"{k}={v}" for k, v in fields.items())
    return (f'<!doctype html><script>fetch({action!r}, {{method: "POST", mode: "no-cors", credentials: "include",'
            f' headers: {{"content-type": "application/x-www-form-urlencoded"}}, body: {body!r}}})'
            f'.finally(() => document.title = "sent")</script>')


@pytest.fixture(scope="module")
def attacker():
    a = Attacker()
    yield a
    a.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(),
                              args=["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP evil.example 127.0.0.1"])
        yield b
        b.close()


@pytest.fixture(scope="module", params=["open", "auth"])
def front(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(f"csrf-{request.param}")
    f = Front.with_auth(work, AUTH) if request.param == "auth" else Front(str(work / "root"), work)
    f.start()
    f.token = ADMIN if request.param == "auth" else None
    yield f
    f.stop()


def console_session(browser, front):
    """A browser session on the console, logged in when the front asks for it; returns its page."""
    context = browser.new_context()
    context.add_init_script(RECORD_CSP)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{front.url}/ui/topics")
    if front.token:
        page.get_by_label("Token").fill(front.token)
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"{front.url}/ui/topics")
    return page


def state_of(http: httpx.Client, topic: str, group: str) -> tuple:
    """What an attack could change: the topics, the topic's records and configs, the group's offsets."""
    topics = sorted(http.get("/v1/topics").json()["topics"])
    d = http.get(f"/v1/topics/{topic}").json()
    offsets = http.get(f"/v1/groups/{group}/offsets").json()["offsets"]
    return topics, [p["high_watermark"] for p in d["partitions"]], d["overrides"], \
        [(o["partition"], o["offset"]) for o in offsets]


def test_cross_site_and_same_site_forms_are_refused(browser, front, attacker):
    topic, group = f"victim-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    with front.client(front.token) as http:
        assert http.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
        assert http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "v"}] * 3}).status_code == 200
        assert http.post(f"/v1/groups/{group}/offsets",
                         json={"offsets": [{"topic": topic, "partition": 0, "offset": 3}]}).status_code == 200
        before = state_of(http, topic, group)
    victim = console_session(browser, front)
    ui = f"{front.url}/ui"
    attacks = {
        "produce": (f"{ui}/topics/{topic}/produce", {"value": "forged"}),
        "create": (f"{ui}/topics", {"name": "forged-topic", "partitions": "1"}),
        "config": (f"{ui}/topics/{topic}/configs", {"name": "retention.ms", "value": "1"}),
        "reset": (f"{ui}/groups/{group}/reset", {"topic": topic, "mode": "earliest"}),
        "delete": (f"{ui}/topics/{topic}/delete", {"confirm": topic, "csrf_token": "guessed"}),
    }
    origins = {"another site": f"http://evil.example:{attacker.port}",
               "another port of 127.0.0.1": f"http://127.0.0.1:{attacker.port}"}
    for origin_name, origin in origins.items():
        for name, (action, fields) in attacks.items():
            attacker.pages[f"/form-{name}"] = form_page(action, fields)
            response = victim.goto(f"{origin}/form-{name}")
            victim.wait_for_url(action)  # the browser submitted the form and shows the front's answer
            body = victim.content()
            assert "INVALID_REQUEST" in body and "may not change anything here" in body, (origin_name, name)
            assert response is not None
            attacker.pages[f"/fetch-{name}"] = fetch_page(action, fields)
            victim.goto(f"{origin}/fetch-{name}")
            expect(victim).to_have_title("sent")
    with front.client(front.token) as http:
        assert state_of(http, topic, group) == before  # nothing was produced, created, set, reset or deleted

    # the console's own forms still work, in the same browser session
    victim.goto(f"{front.url}/ui/topics/{topic}")
    victim.get_by_label("Value", exact=True).fill("own")
    victim.get_by_role("button", name="Produce").click()
    expect(victim.locator("#flash")).to_contain_text("Produced to partition 0 at offset 3")
    victim.get_by_label("retention.ms", exact=True).fill("3600000")
    victim.get_by_role("button", name="Save retention.ms").click()
    expect(victim.locator("#configs")).to_contain_text("retention.ms = 3600000 saved")
    victim.on("dialog", lambda d: d.accept())
    victim.get_by_label("Type the topic's name to confirm").fill(topic)
    victim.get_by_role("button", name="Delete topic").click()
    expect(victim).to_have_url(f"{front.url}/ui/topics")
    victim.get_by_label("Name").fill(f"own-{topic}")
    victim.get_by_role("button", name="Create topic").click()
    expect(victim).to_have_url(f"{front.url}/ui/topics/own-{topic}")
    if front.token:
        victim.get_by_role("button", name="Log out").click()
        expect(victim).to_have_url(f"{front.url}/ui/login")
    assert victim.evaluate("() => window.__csp") == []
    with front.client(front.token) as http:
        assert http.get(f"/v1/topics/{topic}").status_code == 404
        assert http.get(f"/v1/topics/own-{topic}").status_code == 200
    victim.context.close()


def test_a_form_needs_its_own_sessions_token(front):
    """What a browser check cannot show: without Origin and Sec-Fetch-Site, the token alone decides."""
    def session() -> tuple[httpx.Client, str]:
        c = httpx.Client(base_url=front.url, timeout=60)
        if front.token:
            c.post("/ui/login", data={"token": front.token, "next": "/ui/topics",
                                      "csrf_token": token_of(c.get("/ui/login").text)})
        page = c.get("/ui/topics")
        assert page.status_code == 200
        return c, token_of(page.text)

    def token_of(text: str) -> str:
        return re.search(r'name="csrf_token" value="([^"]+)"', text).group(1)

    mine, my_token = session()
    theirs, their_token = session()
    name = f"tok-{uuid.uuid4().hex[:6]}"
    try:
        for fields in ({"name": name}, {"name": name, "csrf_token": ""}, {"name": name, "csrf_token": their_token}):
            r = mine.post("/ui/topics", data=fields)
            assert r.status_code == 403 and "the form&#39;s token" in r.text, r.text[:300]
        assert mine.get(f"/ui/topics/{name}").status_code == 404
        r = mine.post("/ui/topics", data={"name": name, "csrf_token": my_token})
        assert r.status_code == 303 and r.headers["location"] == f"/ui/topics/{name}"
        for path in ("/ui/topics", f"/ui/topics/{name}", "/ui/static/htmx.min.js", "/ui/nowhere"):
            r = mine.get(path)
            assert r.headers["x-content-type-options"] == "nosniff", path
            csp = r.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
    finally:
        mine.close()
        theirs.close()
