"""SaslHandshake (v1) and SaslAuthenticate: authenticate a connection once, as a principal of the HTTP front.

The connection serves only ApiVersions and these two until authentication
succeeds (anything else closes it, as Kafka does).  A failure answers
``SASL_AUTHENTICATION_FAILED`` and leaves the connection unauthenticated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.errors import IllegalSaslState, KafkaError, SaslAuthenticationFailed, UnsupportedSaslMechanism

from api.auth import Principal

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
    return {"error_code": 0, "mechanisms": list(MECHANISMS)}


def _principal(ctx: "FrontContext", user: str) -> Principal:
    return Principal(f"User:{user}")


async def authenticate(ctx: "FrontContext", conn: "Connection", rq: "Request") -> dict:
    token = rq.body.auth_bytes
    try:
        if conn.sasl_mechanism is None:
            raise IllegalSaslState("SaslAuthenticate before SaslHandshake")
        if conn.sasl_mechanism == PLAIN:
            user, password = parse_plain(token)
            if ctx.credentials.check_plain(user, password):
                conn.principal = _principal(ctx, user)
            elif not ctx.authorizer.enabled:
                conn.principal = _principal(ctx, user)  # an open front: any credentials name the caller
            else:
                try:
                    p = ctx.authorizer.authenticate(f"Bearer {password}")
                except KafkaError:
                    p = None
                if p is None or p.name != f"User:{user}":
                    raise SaslAuthenticationFailed(f"authentication failed for user {user!r}")
                conn.principal = p
            conn.sasl_mechanism = None
            return {"error_code": 0, "auth_bytes": b"", "session_lifetime_ms": 0}
        scram: ScramServer = conn.sasl_state  # type: ignore[assignment]
        if scram.user is None:
            return {"error_code": 0, "auth_bytes": scram.first(token), "session_lifetime_ms": 0}
        user, final = scram.final(token)
        conn.principal = _principal(ctx, user)
        conn.sasl_mechanism = conn.sasl_state = None
        return {"error_code": 0, "auth_bytes": final, "session_lifetime_ms": 0}
    except (UnicodeDecodeError, ValueError):
        conn.sasl_mechanism = conn.sasl_state = None
        e = SaslAuthenticationFailed("malformed SASL message")
    except KafkaError as err:
        conn.sasl_mechanism = conn.sasl_state = None
        e = err
    ctx.metrics.count_error(e)
    return {"error_code": e.code, "error_message": e.message, "auth_bytes": b""}
