"""HTTP transport shared by the client classes: base URL, bearer token, and errors as :class:`KafkaError`.

Every non-2xx answer becomes the typed error its body names
(``{"error_code", "error_name", "message"}``); a connection that fails before
an answer becomes the retriable ``NETWORK_EXCEPTION``.  Thread-safe (httpx.Client is).
"""

from __future__ import annotations

from typing import Any

import httpx

from lakelog.errors import KafkaError, NetworkException, error_from_body


def error_from_response(response: httpx.Response) -> KafkaError:
    """The typed error of a failed response (``UNKNOWN_SERVER_ERROR`` if the body names none)."""
    return error_from_body(response.content,
                           f"HTTP {response.status_code} from {response.request.url}: {response.text[:200]}")


class Transport:
    """One connection pool to a front."""

    def __init__(self, bootstrap: str, *, token: str | None = None, timeout: float = 30.0,
                 max_connections: int = 16) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = bootstrap.rstrip("/")
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                   limits=httpx.Limits(max_connections=max_connections,
                                                       max_keepalive_connections=max_connections))

    def request(self, method: str, path: str, *, timeout: float | None = None, **kwargs: Any) -> httpx.Response:
        """Send a request; raise the typed error of a non-2xx answer or ``NETWORK_EXCEPTION``."""
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.TransportError as e:
            raise NetworkException(f"{method} {self.base_url}{path}: {type(e).__name__}: {e}") from None
        if response.status_code >= 400:
            raise error_from_response(response)
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        return response.json() if response.content else None

    def close(self) -> None:
        self.client.close()
