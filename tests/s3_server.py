"""The test S3 server (moto on loopback) and its constants and options, importable from any test module."""

from __future__ import annotations

import threading

BUCKET = "lakelog-test"
CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
         "AWS_DEFAULT_REGION": "us-east-1"}


def s3_options(endpoint: str) -> dict[str, str]:
    return {"aws_endpoint_url": endpoint, "aws_access_key_id": "testing", "aws_secret_access_key": "testing",
            "aws_region": "us-east-1", "aws_allow_http": "true"}


def atomic_conditional_writes(app):
    """Wrap moto's WSGI app so that conditional writes (``If-None-Match: *``, ``If-Match``) are atomic, as S3's
    are: moto checks the condition and then writes, two steps another request can come between, so two
    put-if-absent of one key could both succeed and the second overwrite the first (measured: 5 of 200 rounds
    of 8 racing writers, with a 1 us thread switch interval). Such requests run one at a time."""
    lock = threading.Lock()

    def wrapped(environ, start_response):
        conditional = environ.get("HTTP_IF_NONE_MATCH") or environ.get("HTTP_IF_MATCH")
        if conditional and environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE"):
            with lock:
                return list(app(environ, start_response))  # the whole response made under the lock
        return app(environ, start_response)

    return wrapped


class S3Server:
    """moto's S3 server on a random loopback port, in a thread of this process, with atomic conditional writes."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        app = atomic_conditional_writes(DomainDispatcherApplication(create_backend_app))
        self._server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-s3", daemon=True)

    def start(self) -> "S3Server":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()
