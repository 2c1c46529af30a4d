"""The console's view of the Schema Registry, in headless Chromium against a real front: a topic's page lists
its subjects with their versions and compatibility level, and the message browser decodes values by schema."""

from __future__ import annotations

import io
import json
import shutil
import struct
import uuid

import fastavro
import pytest
from playwright.sync_api import expect, sync_playwright

SCHEMA = {"type": "record", "name": "Ticket", "fields": [{"name": "seat", "type": "string"},
                                                         {"name": "price", "type": "double"}]}


@pytest.fixture(scope="module")
def browser():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Chromium is missing: .ci/run installs Debian's chromium (apt-get install chromium)"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def test_topic_page_shows_subjects_and_decodes_by_schema(browser, front, sr):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    with front.client() as http:
        assert http.post("/v1/topics", json={"name": topic, "partitions": 1,
                                             "configs": {"lakelog.value.schema.columns": "true"}}).status_code == 201
        sid = sr.post(f"/subjects/{topic}-value/versions", json={"schema": json.dumps(SCHEMA)}).json()["id"]
        assert sr.put(f"/config/{topic}-value", json={"compatibility": "FULL"}).status_code == 200
        b = io.BytesIO()
        b.write(b"\x00" + struct.pack(">I", sid))
        fastavro.schemaless_writer(b, fastavro.parse_schema(SCHEMA), {"seat": "12C", "price": 49.5})
        import base64

        r = http.post(f"/v1/topics/{topic}/records", json={"encoding": "base64", "records": [
            {"value": base64.b64encode(b.getvalue()).decode()}]})
        assert r.status_code == 200, r.text
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{front.url}/ui/topics/{topic}")
    table = page.get_by_role("table", name="Schema Registry subjects of this topic")
    expect(table).to_contain_text(f"{topic}-value")
    expect(table).to_contain_text("FULL")
    expect(table).to_contain_text(f"v1 (id {sid}, AVRO)")
    page.get_by_label("From").select_option("offset")
    page.get_by_label("Show as").select_option("schema")
    page.get_by_role("button", name="Show messages").click()
    value = page.locator("#messages pre.value").first
    expect(value).to_contain_text(f"schema id {sid} (AVRO)")
    expect(value).to_contain_text('"seat": "12C"')
    expect(value).to_contain_text('"price": 49.5')
