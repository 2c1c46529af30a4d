"""SaslHandshake and SaslAuthenticate."""

from __future__ import annotations

from lakelog.errors import UnsupportedSaslMechanism


async def handshake(ctx, conn, rq) -> dict:
    raise UnsupportedSaslMechanism("SASL is not enabled on this listener")


async def authenticate(ctx, conn, rq) -> dict:
    raise UnsupportedSaslMechanism("SASL is not enabled on this listener")
