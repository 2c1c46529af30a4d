"""moto's S3 server with S3's atomic conditional writes, for the tests and the benchmarks.

moto checks ``If-None-Match: *`` / ``If-Match`` and then writes, two steps another request can come between, so
two put-if-absent of one key can both succeed and the second overwrite the first (racing writers with a short
thread switch interval make it happen); a Delta commit would be lost though acknowledged.
S3's conditional writes are atomic; here such requests run one at a time.

    python -m bench.moto_server --port PORT     # serve until terminated
"""

from __future__ import annotations

import argparse
import logging
import threading


def atomic_conditional_writes(app):
    """Wrap a WSGI app (moto's) so that conditional writes run one at a time, their responses made in full."""
    lock = threading.Lock()

    def wrapped(environ, start_response):
        conditional = environ.get("HTTP_IF_NONE_MATCH") or environ.get("HTTP_IF_MATCH")
        if conditional and environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE"):
            with lock:
                return list(app(environ, start_response))
        return app(environ, start_response)

    return wrapped


def s3_only(dispatcher, s3):
    """``s3`` (moto's S3 app) for every request but moto's own API (``/moto-api``), which ``dispatcher`` serves.

    moto's dispatcher works out each request's service afresh, under one process-wide lock, and looks for it
    among moto's modules on disk first (a directory listing and an ``isdir`` per service): CPU spent by the
    emulator, not by S3, on the cores the fronts share in the benchmarks (BENCHMARKS.md, "Several fronts on one
    S3 root", counts moto's CPU). This server serves S3 alone, the service every request to it names.
    """

    def wrapped(environ, start_response):
        if environ.get("PATH_INFO", "").startswith("/moto-api"):
            return dispatcher(environ, start_response)
        return s3(environ, start_response)

    return wrapped


class S3Server:
    """moto's S3 server on a loopback port (0: a free one), serving from a thread of this process."""

    def __init__(self, port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        app = atomic_conditional_writes(s3_only(DomainDispatcherApplication(create_backend_app),
                                                create_backend_app("s3")))
        # werkzeug logs every request at INFO, to stderr: a formatted line per PUT nobody reads
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server = make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-s3", daemon=True)

    def start(self) -> "S3Server":
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve from the calling thread until the process ends."""
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    S3Server(parser.parse_args().port).serve_forever()


if __name__ == "__main__":
    main()
