"""Console group pages: the group list (state, members, total lag); per group its members, assignment,
generation and state, lag per partition with a small chart; offset reset (earliest, latest, timestamp,
offset) for a group without active members.  Same services and ACLs as ``/v1/groups``."""

from __future__ import annotations

import threading
import time
from collections import deque
from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from lakelog.broker.authorizer import GROUP, TOPIC
from lakelog.broker.offsets import commit_offsets, fetch_offsets
from lakelog.errors import GroupIdNotFound, InvalidRequest, UnknownTopicOrPartition

from api.console.paths import PREFIX
from api.console.render import page
from api.console.session import PrincipalDep

router = APIRouter(prefix=PREFIX, include_in_schema=False)
Text = Annotated[str, Form(max_length=4096)]
HISTORY = 60  # lag samples kept per partition (one per refresh of the group page)


class LagHistory:
    """Recent lag samples per (group, topic, partition), taken when a group's lag is shown; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str, int], deque] = {}

    def add(self, group: str, topic: str, partition: int, lag: int) -> list[tuple[float, int]]:
        with self._lock:
            series = self._series.setdefault((group, topic, partition), deque(maxlen=HISTORY))
            series.append((time.time(), lag))
            return list(series)


def _history(request: Request) -> LagHistory:
    state = request.app.state
    if getattr(state, "console_lag_history", None) is None:
        state.console_lag_history = LagHistory()
    return state.console_lag_history


CHART_PAD = 2  # px kept free on each side of a chart, so a flat line at its top or bottom is drawn whole


def sparkline(points: list[tuple[float, int]], width: int = 120, height: int = 24) -> str:
    """SVG polyline points for lag samples, oldest to newest across the whole width (one sample per refresh
    of the page), lag on y from 0 at the bottom to the highest sample at the top, inside a
    :data:`CHART_PAD` margin.  A single sample, or a lag that never changes, is a flat line across."""
    lags = [lag for _, lag in points] or [0]
    if len(lags) == 1:
        lags = lags * 2
    top = max(lags)
    x_step = (width - 2 * CHART_PAD) / (len(lags) - 1)
    inner = height - 2 * CHART_PAD
    return " ".join(f"{CHART_PAD + i * x_step:.1f},{CHART_PAD + inner - (lag / top * inner if top else 0):.1f}"
                    for i, lag in enumerate(lags))


def _group(request: Request, principal, group: str) -> dict:
    state = request.app.state
    state.authorizer.authorize(principal, "Describe", GROUP, group)
    visible = lambda t: state.authorizer.allowed(principal, "Describe", TOPIC, t)  # noqa: E731
    offsets = fetch_offsets(state.offsets, state.metadata, group, None, visible)
    try:
        d = state.coordinator.describe(group)
        desc = {"state": d.state, "protocol": d.protocol or None, "generation": d.generation, "leader": d.leader,
                "members": [{"member_id": m.member_id, "client_id": m.client_id, "instance": m.group_instance_id,
                             "assignment": [f"{tp.topic}-{tp.partition}" for tp in m.partitions
                                            if visible(tp.topic)]} for m in d.members]}
    except GroupIdNotFound:
        if not offsets and group not in state.offsets.list_groups():
            raise
        desc = {"state": "Empty", "protocol": None, "generation": 0, "leader": None, "members": []}
    history = _history(request)
    for o in offsets:
        if o["lag"] is not None:
            samples = history.add(group, o["topic"], o["partition"], o["lag"])
            o["chart"] = sparkline(samples)
            o["chart_range"] = (min(lag for _, lag in samples), max(lag for _, lag in samples), len(samples))
    return {"group": group, "offsets": offsets, "total_lag": sum(o["lag"] or 0 for o in offsets), **desc}


def _group_rows(request: Request, principal) -> list[dict]:
    """Each group the principal may Describe: state, member count, committed partitions and total lag (over
    the topics it may Describe, as on the group's page)."""
    state = request.app.state
    coordinated = {g.group_id: g.state for g in state.coordinator.list_groups()}
    names = sorted(set(state.offsets.list_groups()) | set(coordinated))
    visible = lambda t: state.authorizer.allowed(principal, "Describe", TOPIC, t)  # noqa: E731
    rows = []
    for g in names:
        if not state.authorizer.allowed(principal, "Describe", GROUP, g):
            continue
        try:
            members = len(state.coordinator.describe(g).members)
        except GroupIdNotFound:
            members = 0
        offsets = fetch_offsets(state.offsets, state.metadata, g, None, visible)
        lags = [o["lag"] for o in offsets if o["lag"] is not None]
        rows.append({"name": g, "state": coordinated.get(g, "Empty"), "members": members,
                     "partitions": len(offsets), "lag": sum(lags) if lags else None})
    return rows


@router.get("/groups")
def groups_page(request: Request, principal: PrincipalDep) -> Response:
    """The list; the page's refresh (htmx) gets the table alone."""
    if request.headers.get("hx-request"):
        return page(request, "_groups_table.html", rows=_group_rows(request, principal))
    return page(request, "groups.html", principal=principal.name, rows=_group_rows(request, principal))


@router.get("/groups/{group}")
def group_page(request: Request, group: str, principal: PrincipalDep) -> Response:
    return page(request, "group.html", principal=principal.name, g=_group(request, principal, group))


@router.get("/groups/{group}/lag")
def lag_fragment(request: Request, group: str, principal: PrincipalDep) -> Response:
    return page(request, "_group_detail.html", g=_group(request, principal, group))


@router.post("/groups/{group}/reset")
def reset_offsets(request: Request, group: str, principal: PrincipalDep, topic: Text, mode: Text,
                  value: Text = "") -> Response:
    """Kafka's ``kafka-consumer-groups --reset-offsets --to-earliest|--to-latest|--to-datetime|--to-offset`` for
    every partition of ``topic``; refused while the group has active members (Read on the group and the topic,
    as an offset commit)."""
    state = request.app.state
    state.authorizer.authorize(principal, "Read", GROUP, group)
    state.authorizer.authorize(principal, "Read", TOPIC, topic)
    snap = state.metadata.get(topic, fresh=True)
    parts = range(snap.partition_count)
    if mode == "earliest":
        targets = {p: snap.log_start_offset(p) for p in parts}
    elif mode == "latest":
        targets = {p: snap.high_watermark(p) for p in parts}
    elif mode == "timestamp":
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidRequest(f"{value!r} is not an ISO date-time (2026-01-31T12:00:00Z)") from None
        ms = int((when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp() * 1000)
        found = state.log.offsets_for_times(topic, {p: ms for p in parts})
        targets = {p: snap.high_watermark(p) if o is None else o for p, o in found.items()}
    elif mode == "offset":
        try:
            wanted = int(value)
        except ValueError:
            raise InvalidRequest(f"offset {value!r} is not a number") from None
        # Kafka's tool clamps a target outside [log start offset, high watermark] to the nearest end
        targets = {p: min(max(wanted, snap.log_start_offset(p)), snap.high_watermark(p)) for p in parts}
    else:
        raise InvalidRequest(f"reset mode {mode!r} is not one of earliest, latest, timestamp, offset")
    if not targets:
        raise UnknownTopicOrPartition(f"topic {topic} has no partitions")
    state.coordinator.validate_commit(group, None, -1)  # a simple commit: refused while the group has members
    commit_offsets(state.offsets, state.metadata, group, [(topic, p, o, None) for p, o in targets.items()])
    g = _group(request, principal, group)
    g["flash"] = f"Offsets of {group} on {topic} reset to {mode}: " + \
        ", ".join(f"{p}→{o}" for p, o in sorted(targets.items()))
    return page(request, "_group_detail.html", g=g)
