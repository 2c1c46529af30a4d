"""SaslHandshake (v0 and v1) and SaslAuthenticate: authenticate a connection once, as a principal of the HTTP
front.

The connection serves only ApiVersions and these two until authentication
succeeds (anything else closes it, as Kafka does).  After a v1 handshake the
SASL tokens travel in SaslAuthenticate requests, and a failure answers
``SASL_AUTHENTICATION_FAILED`` and leaves the connection unauthenticated.
After a v0 handshake (KIP-43's original framing, which clients fall back to
when they cannot use SaslAuthenticate) the tokens travel as bare size-prefixed
frames with no Kafka header, answered the same way (:func:`raw_token`; an empty
frame once PLAIN succeeds), and a failure closes the connection, as Kafka's
``SaslServerAuthenticator`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.broker.authorizer import Principal
from lakelog.errors import IllegalSaslState, KafkaError, SaslAuthenticationFailed, UnsupportedSaslMechanism

from kafka_front.sasl import MECHANISMS, PLAIN, ScramServer, parse_plain

if TYPE_CHECKING:
    from kafka_front.connection import Connection
    from kafka_front.context import FrontContext
    from kafka_front.request import Request


async def handshake(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    mechanism = rq.body.mechanism
    if conn.sasl_mechanism is not None or (conn.principal is not None and ctx.authorizer.enabled):
        raise IllegalSaslState("this connection already authenticated or began authenticating")
    if mechanism not in MECHANISMS:
        return {"error_code": UnsupportedSaslMechanism.code, "mechanisms": list(MECHANISMS)}
    conn.sasl_mechanism = mechanism
    conn.sasl_state = None if mechanism == PLAIN else ScramServer(mechanism, ctx.credentials)
    conn.sasl_raw = rq.version == 0
    return {"error_code": 0, "mechanisms": list(MECHANISMS)}


def _principal(conn: "Connection", user: str) -> Principal:
    return Principal(f"User:{user}", conn.host)


def _plain(ctx: "FrontContext", conn: "Connection", token: bytes) -> Principal:
    user, password = parse_plain(token)
    if ctx.credentials.check_plain(user, password) or not ctx.authorizer.enabled:
        return _principal(conn, user)  # an open front: any credentials name the caller
    try:
        p = ctx.authorizer.authenticate(f"Bearer {password}")
    except KafkaError:
        p = None
    if p is None or p.name != f"User:{user}":
        raise SaslAuthenticationFailed(f"authentication failed for user {user!r}")
    return Principal(p.name, conn.host)


def _step(ctx: "FrontContext", conn: "Connection", token: bytes) -> bytes:
    """One SASL token of the exchange in progress: the server's answer; sets ``conn.principal`` once done.
    Raises KafkaError, UnicodeDecodeError or ValueError on failure."""
    if conn.sasl_mechanism is None:
        raise IllegalSaslState("SaslAuthenticate before SaslHandshake")
    if conn.sasl_mechanism == PLAIN:
        conn.principal = _plain(ctx, conn, token)
        conn.sasl_mechanism = None
        return b""
    scram: ScramServer = conn.sasl_state  # type: ignore[assignment]
    if scram.user is None:
        return scram.first(token)
    user, final = scram.final(token)
    conn.principal = _principal(conn, user)
    conn.sasl_mechanism = conn.sasl_state = None
    return final


def _reset(conn: "Connection") -> None:
    conn.sasl_mechanism = conn.sasl_state = None
    conn.sasl_raw = False


async def authenticate(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    try:
        if conn.sasl_raw:
            raise IllegalSaslState("SaslAuthenticate after a v0 SaslHandshake: send the bare SASL tokens")
        return {"error_code": 0, "auth_bytes": _step(ctx, conn, rq.body.auth_bytes), "session_lifetime_ms": 0}
    except (UnicodeDecodeError, ValueError):
        e: KafkaError = SaslAuthenticationFailed("malformed SASL message")
    except KafkaError as err:
        e = err
    _reset(conn)
    ctx.metrics.count_error(e)
    return {"error_code": e.code, "error_message": e.message, "auth_bytes": b""}


def raw_token(ctx: "FrontContext", conn: "Connection", token: bytes) -> bytes | None:
    """A bare SASL token after a v0 SaslHandshake: the server's answer to send back, size-prefixed (PLAIN: an
    empty one), or None when authentication fails (the connection is then closed)."""
    try:
        answer = _step(ctx, conn, token)
    except (UnicodeDecodeError, ValueError, KafkaError) as e:
        _reset(conn)
        ctx.metrics.count_error(e if isinstance(e, KafkaError) else SaslAuthenticationFailed("malformed SASL message"))
        return None
    if conn.sasl_mechanism is None:  # done: the next frame is a Kafka request
        conn.sasl_raw = False
    return answer
