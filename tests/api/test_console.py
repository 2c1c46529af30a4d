"""The web console (``/ui``) end to end: headless Chromium (Debian's, driven by Playwright; no browser download)
against a real ``lakelog serve`` with an auth file.

A user logs in once, creates a topic with the keyboard, produces from the page and finds the record in the
message browser; the partitions table refreshes without a reload; a group with lag shows it and a reset
moves it; configs are edited with the front's validation; a delete needs the typed name; a principal
without Describe sees nothing of a topic.  Screenshots go to ``build/screenshots/`` for review.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import struct
import uuid
from pathlib import Path

import fastavro
import pytest
from playwright.sync_api import expect, sync_playwright

from browser_support import RECORD_CSP, chromium
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
    context.add_init_script(RECORD_CSP)
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
    assert page.evaluate("() => window.__csp") == []  # htmx and the pages run under the console's policy
    page.context.close()


def test_configs_and_delete_with_confirmation(browser, front, admin):
    name = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": name, "partitions": 1}).status_code == 201
    page = login(browser, front, "alice", f"/ui/topics/{name}")
    retention = page.get_by_label("retention.ms", exact=True)
    stored = retention.input_value()
    assert stored == admin.get(f"/v1/topics/{name}").json()["configs"]["retention.ms"]
    retention.fill("soon")
    page.get_by_role("button", name="Save retention.ms").click()
    expect(page.locator("#configs")).to_contain_text("INVALID_CONFIG")
    # refused: nothing changed, and the box shows the stored value again, not the refused one
    expect(page.get_by_label("retention.ms", exact=True)).to_have_value(stored)
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
    member, generation = joined.json()["member_id"], joined.json()["member_epoch"]
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


def test_browser_reads_from_the_beginning_an_offset_and_a_timestamp(browser, front, admin):
    topic = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
    early = [{"key": f"k{i}", "value": f"early-{i}", "timestamp": 1_700_000_000_000 + i} for i in range(60)]
    late = [{"key": f"k{i}", "value": f"late-{i}", "timestamp": 1_750_000_000_000 + i} for i in range(60, 120)]
    # both in the past: a timestamp past message.timestamp.after.max.ms (an hour) from now is refused
    assert admin.post(f"/v1/topics/{topic}/records", json={"records": early + late}).status_code == 200
    page = login(browser, front, "alice", f"/ui/topics/{topic}")
    offsets = page.locator("#messages tbody tr td:first-child")

    page.get_by_label("From").select_option(label="the beginning")
    page.get_by_role("button", name="Show messages").click()
    expect(offsets).to_have_count(50)
    expect(offsets.first).to_have_text("0")
    expect(page).to_have_url(re.compile(r"/messages\?.*start=earliest"))  # the address shows what is browsed
    page.get_by_role("link", name=re.compile("Next 50 from offset 50")).click()
    expect(offsets.first).to_have_text("50")
    expect(offsets).to_have_count(50)

    page.get_by_label("From").select_option(label="an offset")
    page.get_by_label("Offset").fill("117")
    page.get_by_role("button", name="Show messages").click()
    expect(offsets).to_have_text(["117", "118", "119"])

    page.get_by_label("From").select_option(label="a timestamp")
    page.get_by_label("Timestamp (ISO)").fill("2025-01-01T00:00:00Z")  # after the early records, before the late
    page.get_by_role("button", name="Show messages").click()
    expect(offsets.first).to_have_text("60")
    expect(page.locator("#messages pre.value").first).to_have_text("late-60")

    # an address typed by hand (or reloaded) is the topic page with the results, not an error page
    response = page.goto(f"{front.url}/ui/topics/{topic}/messages?start=earliest")
    assert response.status == 200
    expect(page.get_by_role("heading", name=f"Topic {topic}")).to_be_visible()
    expect(offsets.first).to_have_text("0")
    expect(page.get_by_label("From")).to_have_value("earliest")
    page.reload()
    expect(offsets).to_have_count(50)
    response = page.goto(f"{front.url}/ui/topics/{topic}/messages?start=yesterday")
    assert response.status == 400 and "INVALID_REQUEST" in page.content()
    assert page.evaluate("() => window.__csp") == []
    page.context.close()


def messages_page(browser, front, topic: str, fmt: str, count: int):
    """Alice's messages page of ``topic`` from offset 0 in format ``fmt``: (the page, its ``count`` values)."""
    page = login(browser, front, "alice", f"/ui/topics/{topic}")
    response = page.goto(f"{front.url}/ui/topics/{topic}/messages?start=offset&offset=0&fmt={fmt}")
    assert response.status == 200
    shown = page.locator("#messages pre.value")
    expect(shown).to_have_count(count)
    return page, shown


def test_hostile_values_render_safely(browser, front, admin):
    """100,000 and 10,000 nested brackets, deep-but-valid JSON and a 1 MB value, beside a normal record: the
    window answers, every record is shown, JSON is pretty where it is safe to be."""
    topic = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 1,
                                          "configs": {"max.message.bytes": str(2 << 20)}}).status_code == 201
    deep = "[" * 100_000
    recursive = "[" * 10_000  # short enough to be parsed: deeper than the interpreter's recursion limit
    nested = "[" * 200 + "]" * 200  # valid, but indenting it would cost depth x size
    big = "x" * (1 << 20)
    values = [deep, recursive, '{"ok": [1, 2]}', nested, big]
    r = admin.post(f"/v1/topics/{topic}/records", json={"records": [{"value": v} for v in values]})
    assert r.status_code == 200, r.text
    page, shown = messages_page(browser, front, topic, "json", 5)
    assert shown.nth(0).inner_text().startswith("[[[[") and "more bytes (100,000 in all)" in shown.nth(0).inner_text()
    assert shown.nth(1).inner_text() == recursive  # as sent
    assert shown.nth(2).inner_text() == '{\n  "ok": [\n    1,\n    2\n  ]\n}'
    assert shown.nth(3).inner_text() == nested  # as sent
    assert "more bytes (1,048,576 in all)" in shown.nth(4).inner_text()
    assert len(page.content()) < 200_000
    page.context.close()


def test_hostile_schema_framed_values_render_cut(browser, front, admin):
    """Values in the Schema Registry's wire format are cut like any other: a 1 MB string decoded by its schema,
    1 MB that does not decode by it, and 1 MB under an unknown schema id each show at most DISPLAY_BYTES."""
    topic = f"ok-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 1,
                                          "configs": {"max.message.bytes": str(4 << 20)}}).status_code == 201
    schema = {"type": "record", "name": "Big", "fields": [{"name": "s", "type": "string"}]}
    r = admin.post(f"/schema-registry/subjects/{topic}-value/versions", json={"schema": json.dumps(schema)})
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    size = 1 << 20
    record = io.BytesIO()
    fastavro.schemaless_writer(record, fastavro.parse_schema(schema), {"s": "x" * size})
    decodes = b"\x00" + struct.pack(">I", sid) + record.getvalue()
    undecodable = b"\x00" + struct.pack(">I", sid) + b"\xff" * size  # a varint that never ends
    unknown = b"\x00" + struct.pack(">I", sid + 1_000_000) + b"\x01" * size
    r = admin.post(f"/v1/topics/{topic}/records", json={"encoding": "base64", "records": [
        {"value": base64.b64encode(v).decode()} for v in (decodes, undecodable, unknown)]})
    assert r.status_code == 200, r.text
    page, shown = messages_page(browser, front, topic, "schema", 3)
    decoded, cannot, missing = (shown.nth(i).inner_text() for i in range(3))
    assert decoded.startswith(f"schema id {sid} (AVRO)\n{{\n  \"s\": \"xxxx")
    assert decoded.endswith(f"the rest of the record not shown ({len(decodes):,} bytes in all)")
    assert cannot.startswith(f"schema id {sid} (AVRO): cannot decode") and "\nff ff ff" in cannot
    assert cannot.endswith(f"more bytes ({size:,} in all)")
    assert missing.startswith(f"schema id {sid + 1_000_000} (not in the Schema Registry)\n01 01 01")
    assert missing.endswith(f"more bytes ({size:,} in all)")
    assert len(page.content()) < 200_000
    page.context.close()


def test_group_list_shows_state_members_and_lag(browser, front, admin):
    topic, busy, idle = f"ok-{uuid.uuid4().hex[:8]}", f"g-ok-{uuid.uuid4().hex[:6]}", f"g-ok-{uuid.uuid4().hex[:6]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 2}).status_code == 201
    r = admin.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "v", "partition": p} for p in (0, 1)] * 6})
    assert r.status_code == 200
    assert admin.post(f"/v1/groups/{idle}/offsets", json={"offsets": [
        {"topic": topic, "partition": 0, "offset": 2}, {"topic": topic, "partition": 1, "offset": 5}]}).status_code == 200
    joined = admin.post(f"/v1/groups/{busy}/members", json={"topics": [topic], "client_id": "list-test",
                                                            "session_timeout_ms": 60_000})
    assert joined.status_code == 200, joined.text
    try:
        page = login(browser, front, "alice", "/ui/groups")
        head = page.locator("table.groups thead th")
        expect(head).to_have_text(["Group", "State", "Members", "Partitions with offsets", "Total lag"])
        idle_row, busy_row = page.locator(f'tr[data-group="{idle}"]'), page.locator(f'tr[data-group="{busy}"]')
        expect(idle_row.locator(".state")).to_have_text("Empty")
        expect(idle_row.locator(".members")).to_have_text("0")
        expect(idle_row.locator(".lag")).to_have_text("5")  # 6 - 2 + 6 - 5
        expect(busy_row.locator(".state")).to_have_text("Stable")
        expect(busy_row.locator(".members")).to_have_text("1")
        expect(busy_row.locator(".lag")).to_have_text("-")  # no committed offset: no lag to show
        # live: the list refreshes by itself
        admin.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "w", "partition": 0}] * 4})
        expect(idle_row.locator(".lag")).to_have_text("9", timeout=10_000)
        page.get_by_role("link", name=idle).click()
        expect(page).to_have_url(f"{front.url}/ui/groups/{idle}")
        page.context.close()
    finally:
        admin.delete(f"/v1/groups/{busy}/members/{joined.json()['member_id']}")


def test_sparklines_draw_for_every_partition(browser, front, admin):
    """Every partition's chart is a visible line across the whole chart from its first sample: a partition seen
    once, one whose lag never changes (13) and one at 0 -- each drawn inside the box, none blank."""
    topic, group = f"ok-{uuid.uuid4().hex[:8]}", f"g-ok-{uuid.uuid4().hex[:6]}"
    assert admin.post("/v1/topics", json={"name": topic, "partitions": 3}).status_code == 201
    r = admin.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "v", "partition": p}
                                                                    for p in (0, 1, 2) for _ in range(13)]})
    assert r.status_code == 200
    assert admin.post(f"/v1/groups/{group}/offsets", json={"offsets": [
        {"topic": topic, "partition": 0, "offset": 0}, {"topic": topic, "partition": 1, "offset": 13}]}).status_code == 200
    page = login(browser, front, "alice", f"/ui/groups/{group}")

    def charts() -> list[dict]:
        return page.evaluate("""() => [...document.querySelectorAll('table.lag tbody tr')].map(tr => {
            const line = tr.querySelector('svg polyline');
            if (!line) return {partition: tr.dataset.partition, drawn: false};
            const box = line.getBBox(), ys = line.getAttribute('points').split(' ').map(p => +p.split(',')[1]);
            return {partition: tr.dataset.partition, drawn: true, width: box.width,
                    minY: Math.min(...ys), maxY: Math.max(...ys), lag: tr.querySelector('.lag-value').textContent};
        })""")

    def visible(rows: list[dict]) -> bool:
        return all(c["drawn"] and c["width"] >= 100 and 1 <= c["minY"] and c["maxY"] <= 23 for c in rows)

    first = charts()
    assert [c["lag"] for c in first] == ["13", "0"], first
    assert visible(first), first  # one sample each: already a line across
    # a partition whose commit arrives later gets its chart from its first sample, beside the others' history
    assert admin.post(f"/v1/groups/{group}/offsets", json={"offsets": [
        {"topic": topic, "partition": 2, "offset": 1}]}).status_code == 200
    expect(page.locator('tr[data-partition="2"] svg polyline')).to_have_count(1, timeout=10_000)
    rows = charts()
    assert [c["lag"] for c in rows] == ["13", "0", "12"] and visible(rows), rows
    shot(page, "console-sparklines")
    page.context.close()


def test_favicon_is_served(browser, front):
    page = login(browser, front, "alice")
    href = page.evaluate("() => document.querySelector('link[rel=icon]').href")
    assert href == f"{front.url}/favicon.ico"
    sizes = page.evaluate("""async href => {
        const img = new Image(); img.src = href; await img.decode(); return [img.naturalWidth, img.naturalHeight];
    }""", href)
    assert sizes in ([16, 16], [32, 32])  # the browser decoded one of the icon's images
    response = page.request.get(f"{front.url}/favicon.ico")
    assert response.status == 200 and response.headers["content-type"] == "image/x-icon"
    page.context.close()
