"""Where a command sends its requests: the storage root itself, a Kafka listener, or a front's HTTP address.

    --bootstrap-server HOST:PORT[,HOST:PORT]   a Kafka listener, as in every Kafka tool: a lakelog front's
                                               ``serve --kafka-listener`` address, or any Kafka broker
    --command-config FILE                      Kafka client properties for it (security.protocol,
                                               sasl.mechanism, sasl.username, ...), as Kafka's tools take
    --url http://HOST:PORT                     a lakelog front's HTTP address (``produce`` and ``groups``)

Without either, a command reads and writes the storage root (``--root``) directly.  Over Kafka the command
is a Kafka client (confluent-kafka, that is librdkafka), so it behaves as Kafka's own tools do against any
broker.  The HTTP front's address given to ``--bootstrap-server`` -- a URL, or its port -- is refused with
an error that names ``--url`` (:class:`TransportUsageError`, exit 2).
"""

from __future__ import annotations

import argparse
import collections
import logging
from typing import Iterable

CLIENT_ID = "lakelog-cli"
#: how long a command waits for a Kafka listener's first answer before it says it cannot reach one
CONNECT_TIMEOUT_S = 10.0
#: the first, short wait, after which an address that answers HTTP is named as the HTTP front
PROBE_AFTER_S = 1.0


class TransportUsageError(Exception):
    """The command was pointed at the wrong kind of endpoint (exit 2, like any usage error)."""


def add_transport_options(parser: argparse.ArgumentParser, *, http: bool) -> None:
    """``--bootstrap-server`` and ``--command-config``; with ``http``, also ``--url``."""
    group = parser.add_argument_group("connection (default: the storage root, read and written directly)")
    group.add_argument("--bootstrap-server", dest="bootstrap_server", type=bootstrap_servers,
                       metavar="HOST:PORT",
                       help="a Kafka listener to send requests to, as in Kafka's tools: a running front's "
                            "--kafka-listener address (or any Kafka broker); comma-separated for several")
    group.add_argument("--command-config", dest="command_config", metavar="FILE", type=properties_file,
                       help="Kafka client properties for --bootstrap-server (security.protocol, sasl.mechanism, "
                            "sasl.username, sasl.password, ...), one KEY=VALUE a line")
    if http:
        group.add_argument("--url", dest="url", type=http_url, metavar="URL",
                           help="a running front's HTTP address (lakelog serve), e.g. http://127.0.0.1:8080; "
                                "a bearer token is read from $LAKELOG_TOKEN")


def check_transport(args: argparse.Namespace) -> None:
    """Refuse ``--url`` with ``--bootstrap-server``, and ``--command-config`` alone."""
    if getattr(args, "url", None) and getattr(args, "bootstrap_server", None):
        raise TransportUsageError("give --bootstrap-server (a Kafka listener) or --url (the HTTP front), not both")
    if getattr(args, "command_config", None) and not getattr(args, "bootstrap_server", None):
        raise TransportUsageError("--command-config configures the Kafka client: it needs --bootstrap-server")


def bootstrap_servers(text: str) -> str:
    """argparse type of ``--bootstrap-server``: ``HOST:PORT[,HOST:PORT...]``, never a URL."""
    text = text.strip()
    if "://" in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a URL: --bootstrap-server takes a Kafka listener's HOST:PORT, as Kafka's tools do "
            f"(a front's --kafka-listener address); for the front's HTTP address use --url {text}")
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {text!r}")
    return text


def http_url(text: str) -> str:
    """argparse type of ``--url``: ``http(s)://HOST:PORT``."""
    text = text.strip().rstrip("/")
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"expected http://HOST:PORT (the front's HTTP address), got {text!r}")
    return text


def properties_file(path: str) -> dict[str, str]:
    """argparse type of ``--command-config``: Java-properties ``KEY=VALUE`` lines, ``#`` and ``!`` comments."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e.strerror}") from None
    out: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"{path}:{n}: expected KEY=VALUE, got {line!r}")
        out[key.strip()] = value.strip()
    return out


class _Recorder(logging.Handler):
    """Keeps librdkafka's last log lines, to explain a failure, instead of printing them as they come."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: collections.deque[str] = collections.deque(maxlen=5)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def client_config(args: argparse.Namespace, **extra) -> tuple[dict, _Recorder]:
    """The confluent-kafka configuration for ``args``, and the recorder of its log lines."""
    recorder = _Recorder()
    logger = logging.getLogger(f"lakelog.cli.librdkafka.{id(recorder)}")
    logger.propagate = False
    logger.addHandler(recorder)
    logger.setLevel(logging.DEBUG)
    conf = {"bootstrap.servers": args.bootstrap_server, "client.id": CLIENT_ID, "logger": logger}
    conf.update(extra)
    conf.update(getattr(args, "command_config", None) or {})
    return conf, recorder


def connect(client, args: argparse.Namespace, recorder: _Recorder):
    """The cluster's metadata, or a clear error: the HTTP front named (:class:`TransportUsageError`), or
    ``NETWORK_EXCEPTION`` with librdkafka's last word on it."""
    from confluent_kafka import KafkaException

    from lakelog.errors import NetworkException

    try:
        return client.list_topics(timeout=PROBE_AFTER_S)
    except KafkaException:
        _refuse_http_front(args)
    try:
        return client.list_topics(timeout=CONNECT_TIMEOUT_S - PROBE_AFTER_S)
    except KafkaException as e:
        client.poll(0)  # delivers the log lines queued meanwhile
        reason = recorder.lines[-1] if recorder.lines else e.args[0].str()
        raise NetworkException(f"no Kafka listener answered at {args.bootstrap_server} within "
                               f"{CONNECT_TIMEOUT_S:.0f} s: {reason}") from None


def _refuse_http_front(args: argparse.Namespace) -> None:
    """If an address given to ``--bootstrap-server`` answers HTTP, say it is the HTTP front, naming ``--url``."""
    import httpx

    for address in args.bootstrap_server.split(","):
        address = address.strip()
        try:
            answer = httpx.get(f"http://{address}/v1/health", timeout=2.0)
        except httpx.HTTPError:
            continue  # not HTTP either: librdkafka's own reason will be reported
        what = "lakelog's HTTP front" if answer.status_code == 200 and "root" in answer.text else "an HTTP server"
        instead = (f"use --url http://{address} for the HTTP front, or " if hasattr(args, "url")
                   else "use ")
        raise TransportUsageError(
            f"{address} answers HTTP: it is {what}, not a Kafka listener. --bootstrap-server takes a Kafka "
            f"listener, as in Kafka's tools: {instead}--bootstrap-server with the front's --kafka-listener "
            f"address (lakelog serve --kafka-listener HOST:PORT)")


def raise_kafka_error(err) -> None:
    """Raise a confluent-kafka ``KafkaError`` as lakelog's typed error with the same Kafka code."""
    from confluent_kafka import KafkaError as CKError

    from lakelog.errors import (NetworkException, RequestTimedOut, UnknownServerError, UnknownTopicOrPartition,
                                UnsupportedVersion, error_for_code)

    code, text = err.code(), err.str()
    if code > 0:
        raise error_for_code(code, text)
    local = {CKError._UNKNOWN_TOPIC: UnknownTopicOrPartition, CKError._UNKNOWN_PARTITION: UnknownTopicOrPartition,
             CKError._TIMED_OUT: RequestTimedOut, CKError._MSG_TIMED_OUT: RequestTimedOut,
             CKError._TRANSPORT: NetworkException, CKError._ALL_BROKERS_DOWN: NetworkException,
             CKError._UNSUPPORTED_FEATURE: UnsupportedVersion}
    if code == CKError._UNSUPPORTED_FEATURE:
        text = f"{text}: the listener does not serve the request this command needs"
    raise local.get(code, UnknownServerError)(text)


def result(future, timeout: float = 30.0):
    """A confluent-kafka admin future's result, its failure raised as lakelog's typed error."""
    from confluent_kafka import KafkaException

    try:
        return future.result(timeout=timeout)
    except KafkaException as e:
        raise_kafka_error(e.args[0])


def topic_partitions(metadata, topic: str, partitions: Iterable[int] | None = None) -> list[int]:
    """The partitions of ``topic`` in ``metadata`` (those asked for, checked), or UNKNOWN_TOPIC_OR_PARTITION."""
    from lakelog.errors import UnknownTopicOrPartition

    tm = metadata.topics.get(topic)
    if tm is None or tm.error is not None:
        if tm is not None and tm.error is not None and tm.error.code() not in (3, -188):
            raise_kafka_error(tm.error)
        raise UnknownTopicOrPartition(f"topic {topic} does not exist")
    known = sorted(tm.partitions)
    if partitions is None:
        return known
    for p in partitions:
        if p not in tm.partitions:
            raise UnknownTopicOrPartition(f"partition {p} of topic {topic} does not exist "
                                          f"(the topic has {len(known)} partitions)")
    return list(partitions)
