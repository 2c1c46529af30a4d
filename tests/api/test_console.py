"""The web console (``/ui``) end to end: headless Chromium (Debian's, driven by Playwright; no browser download)
against a real ``lakelog serve`` with an auth file.

A user logs in once, creates a topic with the keyboard, produces from the page and finds the record in the
message browser; the partitions table refreshes without a reload; a group with lag shows it and a reset
moves it; configs are edited with the front's validation; a delete needs the typed name; a principal
without Describe sees nothing of a topic.  Screenshots go to ``build/screenshots/`` for review.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from front_process import Front

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
TOKENS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTH = {
    "tokens": [{"principal": "User:admin", "token": TOKENS["admin"]},
               {"principal": "User:alice", "token_sha256": hashlib.sha256(b"alice-secret").hexdigest()},
               {"principal": "User:bob", "token": TOKENS["bob"]}],
    "super_users": ["User:admin"],
    "acls": [
        {"principal": "User:alice", "resource_type": "Topic", "pattern_type": "Prefixed", "resource_name": "ok-",
         "operations": ["Create", "Describe", "Alter", "Delete", "Write", "Read"]},
        {"principal": "User:alice", "resource_type": "Group", "pattern_type": "Prefixed", "resource_name": "g-ok",
         "operations": ["Read", "Describe"]},
        {"principal": "User:bob", "resource_type": "Topic", "resource_name": "bob-only", "operations": ["Describe"]},
    ],
}


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Chromium is missing: .ci/run installs Debian's chromium (apt-get install chromium)"
    return path


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    f = Front.with_auth(tmp_path_factory.mktemp("console-front"), AUTH).start()
    yield f
    f.stop()


@pytest.fixture(scope="module")
def admin(front):
    with front.client(TOKENS["admin"]) as c:
        yield c


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def login(browser, front, who: str, start: str = "/ui/topics"):
    """A fresh browser session, logged in through the login form; returns its page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(front.url + start)
    expect(page).to_have_url(f"{front.url}/ui/login?next={start}")  # no token yet: the login page
    page.get_by_label("Token").fill(TOKENS[who])
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(front.url + start)
    return page


def shot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    return path


def test_create_topic_produce_and_browse(browser, front, admin):
    page = login(browser, front, "alice")
    name = f"ok-{uuid.uuid4().hex[:8]}"
    # create with the keyboard only: type, Tab to the next field, Enter submits
    page.get_by_label("Name").focus()
    page.keyboard.type(name)
    page.keyboard.press("Tab")
    page.keyboard.press("Control+A")
    page.keyboard.type("2")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{front.url}/ui/topics/{name}")
    expect(page.get_by_role("heading", name=f"Topic {name}")).to_be_visible()
    assert [p["high_watermark"] for p in admin.get(f"/v1/topics/{name}").json()["partitions"]] == [0, 0]

    page.get_by_label("Key", exact=True).fill("user-7")
    page.get_by_label("Value", exact=True).fill('{"order": 42, "items": ["a", "b"]}')
    page.get_by_label("Partition (optional)").fill("1")
    page.get_by_label("Header name").fill("trace")
    page.get_by_label("Header value").fill("abc-123")
    page.get_by_role("button", name="Produce").click()
    expect(page.locator("#flash")).to_contain_text("Produced to partition 1 at offset 0")
    # the partitions table refreshes by itself: partition 1's high watermark becomes 1 without a reload
    expect(page.locator("#partitions tbody tr").nth(1).locator("td.hw")).to_have_text("1", timeout=10_000)

    page.get_by_label("Partition", exact=True).select_option("1")
    page.get_by_label("From").select_option("offset")
    page.get_by_label("Offset").fill("0")
    page.get_by_label("Show as").select_option("json")
    page.get_by_role("button", name="Show messages").click()
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("pre.value")).to_contain_text('"order": 42')
    expect(rows.first).to_contain_text("user-7")
    expect(rows.first).to_contain_text("abc-123")
    shot(page, "console-topic")

    page.get_by_label("Show as").select_option("hex")
    page.get_by_role("button", name="Show messages").click()
    expect(page.locator("#messages pre.value").first).to_contain_text("7b 22 6f 72 64 65 72 22")  # {"order"
    page.get_by_label("Show as").select_option("text")
    page.get_by_label("From").select_option("timestamp")  # Kafka's offsets-for-times
    page.get_by_label("Timestamp (ISO)").fill("2000-01-01T00:00:00Z")
    page.get_by_role("button", name="Show messages").click()
    expect(page.locator("#messages tbody tr")).to_have_count(1)
    expect(page.locator("#messages")).to_contain_text("user-7")
    page.get_by_label("Timestamp (ISO)").fill("2999-01-01T00:00:00Z")
    page.get_by_role("button", name="Show messages").click()
    expect(page.locator("#messages")).to_contain_text("No messages.")
    page.get_by_label("From").select_option("latest")
    page.get_by_label("Key contains").fill("nobody")
    page.get_by_role("button", name="Show messages").click()
    expect(page.locator("#messages")).to_contain_text("No messages.")
    page.get_by_label("Key contains").fill("user")
    page.get_by_role("button", name="Show messages").click()
    expect(page.locator("#messages tbody tr")).to_have_count(1)
    # what the page produced is in the log, through the API
    rec = admin.get(f"/v1/topics/{name}/partitions/1/records", params={"offset": 0}).json()["records"][0]
    assert (rec["key"], json.loads(rec["value"])["order"], rec["headers"]) == \
        ("user-7", 42, [{"key": "trace", "value": "abc-123"}])
    page.context.close()


def test_configs_and_delete_with_confirmation(browser, front, admin):
    name = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": name, "partitions": 1}).status_code == 201
    page = login(browser, front, "alice", f"/ui/topics/{name}")
    retention = page.get_by_label("retention.ms", exact=True)
    retention.fill("soon")
    page.get_by_role("button", name="Save retention.ms").click()
    expect(page.locator("#flash")).to_contain_text("INVALID_CONFIG")
    assert "retention.ms" not in admin.get(f"/v1/topics/{name}").json()["overrides"]
    page.get_by_label("retention.ms", exact=True).fill("3600000")
    page.get_by_role("button", name="Save retention.ms").click()
    expect(page.locator("#configs")).to_contain_text("retention.ms = 3600000 saved")
    assert admin.get(f"/v1/topics/{name}").json()["overrides"]["retention.ms"] == "3600000"

    page.on("dialog", lambda d: d.accept())
    page.get_by_label("Type the topic's name to confirm").fill("not-the-name")
    page.get_by_role("button", name="Delete topic").click()
    expect(page.locator("#flash")).to_contain_text("type the topic's name")
    assert admin.get(f"/v1/topics/{name}").status_code == 200
    page.get_by_label("Type the topic's name to confirm").fill(name)
    page.get_by_role("button", name="Delete topic").click()
    expect(page).to_have_url(f"{front.url}/ui/topics")
    assert admin.get(f"/v1/topics/{name}").status_code == 404
    expect(page.locator("#topics-table")).not_to_contain_text(name)
    page.context.close()


def test_group_lag_shows_and_reset_moves_it(browser, front, admin):
    topic, group = f"ok-{uuid.uuid4().hex[:8]}", f"g-ok-{uuid.uuid4().hex[:6]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
    assert admin.post(f"/v1/topics/{topic}/records", json={"records": [{"value": str(i)} for i in range(5)]}) \
        .status_code == 200
    assert admin.post(f"/v1/groups/{group}/offsets",
                      json={"offsets": [{"topic": topic, "partition": 0, "offset": 1}]}).status_code == 200
    page = login(browser, front, "alice", f"/ui/groups/{group}")
    row = page.locator(f'tr[data-topic="{topic}"][data-partition="0"]')
    expect(row.locator("td.lag-value")).to_have_text("4")
    expect(page.locator(".total-lag")).to_have_text("4")
    expect(row.locator("svg polyline")).to_have_count(1)
    # live: more records raise the lag on the open page
    admin.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "x"}] * 3})
    expect(row.locator("td.lag-value")).to_have_text("7", timeout=10_000)
    shot(page, "console-group")
    page.get_by_label("To", exact=True).select_option("offset")
    page.get_by_label("Timestamp or offset").fill("6")
    page.get_by_role("button", name="Reset offsets").click()
    expect(page.locator("#group")).to_contain_text("reset to offset")
    expect(page.locator(f'tr[data-topic="{topic}"][data-partition="0"] td.lag-value')).to_have_text("2")
    page.get_by_label("To", exact=True).select_option("latest")
    page.get_by_role("button", name="Reset offsets").click()
    expect(page.locator(f'tr[data-topic="{topic}"][data-partition="0"] td.lag-value')).to_have_text("0")
    offsets = admin.get(f"/v1/groups/{group}/offsets").json()["offsets"]
    assert [(o["offset"], o["lag"]) for o in offsets] == [(8, 0)]
    page.context.close()


def test_storage_page(browser, front, admin):
    topic = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
    for _ in range(3):
        admin.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "v"}] * 10})
    page = login(browser, front, "alice", f"/ui/topics/{topic}/storage")
    expect(page.locator(".live-files")).to_have_text("3")
    expect(page.locator(".checkpoint-adds")).to_have_text("3")
    expect(page.locator(".commits-since-checkpoint")).to_have_text("4")  # create + 3 appends, no checkpoint yet
    expect(page.locator("svg rect")).to_have_count(6)  # each segment on the offset and on the time axis
    expect(page.locator("table.commits td.op").first).to_have_text("append")
    expect(page.locator("ul.due")).to_be_visible()
    shot(page, "console-storage")
    page.context.close()


def test_accessibility_basics(browser, front, admin):
    topic = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
    page = login(browser, front, "alice", f"/ui/topics/{topic}")
    unlabelled = page.evaluate("""() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
        .filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.name || e.id)""")
    assert unlabelled == []
    assert page.evaluate("() => document.documentElement.lang") == "en"
    assert page.locator("main").count() == 1 and page.locator("nav").count() == 1
    page.keyboard.press("Tab")  # the first stop is the skip link, then the navigation
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Topics"
    buttons = page.evaluate("() => [...document.querySelectorAll('button')].filter(b => !b.textContent.trim()"
                            " && !b.getAttribute('aria-label')).length")
    assert buttons == 0
    page.context.close()


def test_principal_without_describe_sees_nothing(browser, front, admin):
    secret = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": secret, "partitions": 1}).status_code == 201
    assert admin.post(f"/v1/topics/{secret}/records", json={"records": [{"value": "classified-payload"}]}) \
        .status_code == 200
    page = login(browser, front, "bob")
    expect(page.locator("#topics-table")).to_be_visible()
    assert secret not in page.content()
    for path in (f"/ui/topics/{secret}", f"/ui/topics/{secret}/storage",
                 f"/ui/topics/{secret}/messages?partition=0&start=offset&offset=0"):
        response = page.goto(front.url + path)
        assert response.status == 403, path
        body = page.content()
        assert "TOPIC_AUTHORIZATION_FAILED" in body
        assert "classified-payload" not in body and "High watermark" not in body and "Log start offset" not in body
    # and the group pages show no offsets of topics bob may not describe
    response = page.goto(f"{front.url}/ui/groups/g-ok-x")
    assert response.status == 403 and "GROUP_AUTHORIZATION_FAILED" in page.content()
    page.context.close()


def test_group_with_a_member_shows_it_and_refuses_a_reset(browser, front, admin):
    topic, group = f"ok-{uuid.uuid4().hex[:8]}", f"g-ok-{uuid.uuid4().hex[:6]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 2}).status_code == 201
    joined = admin.post(f"/v1/groups/{group}/members", json={"topics": [topic], "client_id": "console-test",
                                                             "session_timeout_ms": 60_000})
    assert joined.status_code == 200, joined.text
    member, generation = joined.json()["member_id"], joined.json()["generation"]
    try:
        page = login(browser, front, "alice", f"/ui/groups/{group}")
        expect(page.locator(".state")).to_have_text("Stable")
        expect(page.locator("#group")).to_contain_text(f"generation {generation}")
        expect(page.locator("#group")).to_contain_text("console-test")
        expect(page.locator("#group")).to_contain_text(f"{topic}-0, {topic}-1")
        page.get_by_label("Topic", exact=True).fill(topic)
        page.get_by_label("To", exact=True).select_option("earliest")
        page.get_by_role("button", name="Reset offsets").click()
        expect(page.locator("#flash")).to_contain_text("UNKNOWN_MEMBER_ID")  # active members: refused
        assert admin.get(f"/v1/groups/{group}/offsets").json()["offsets"] == []
        page.context.close()
    finally:
        admin.delete(f"/v1/groups/{group}/members/{member}")


def test_record_content_is_shown_as_text_never_run(browser, front, admin):
    topic = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
    hostile = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    assert admin.post(f"/v1/topics/{topic}/records", json={"records": [
        {"key": hostile, "value": hostile, "headers": [{"key": "<b>h</b>", "value": hostile}]}]}).status_code == 200
    page = login(browser, front, "alice", f"/ui/topics/{topic}")
    page.get_by_role("button", name="Show messages").click()
    expect(page.locator("#messages pre.value")).to_have_text(hostile)
    assert page.evaluate("() => window.pwned === undefined")
    assert page.locator("#messages script, #messages img, #messages b").count() == 0
    page.context.close()
