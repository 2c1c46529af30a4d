"""``lakelog serve``: run the HTTP front (FastAPI on uvicorn) over a storage root.

    lakelog serve [--root ROOT] [--host 127.0.0.1] [--port 8080] [--auth-file FILE]
                  [--kafka-listener HOST:PORT] [--kafka-advertised HOST:PORT] [--sasl-file FILE]
                  [--auto-create-topics-enable true|false] [--num-partitions N]
                  [--fetch-max-bytes BYTES] [--sasl-server-max-receive-size BYTES]
                  [--linger-ms MS] [--batch-size BYTES] [--buffer-memory BYTES] [--eager-uploads]
                  [--max-request-bytes BYTES] [--access-log] [--node-id N [--advertised-url URL]]

Binds loopback unless told otherwise.  Without ``--auth-file`` every request
is allowed, and the command says so on stderr when it starts.  Settings not
given here come from ``LAKELOG_*`` environment variables (see
:class:`api.settings.Settings`).  SIGTERM / Ctrl-C stop it gracefully:
pending appends are committed before the process exits.
"""

from __future__ import annotations

import argparse
import logging
import sys

from lakelog.cli.global_options import key_values


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="run the HTTP front (produce, fetch, topics, offsets) over the root",
        description="Run the HTTP front. OpenAPI docs at /docs, health at /v1/health, metrics at /metrics.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, default=8080, help="port to bind (default 8080)")
    p.add_argument("--auth-file", metavar="FILE",
                   help="JSON file of bearer tokens and ACLs (docs/http.md); without it the front is open")
    p.add_argument("--kafka-listener", metavar="HOST:PORT",
                   help="also serve Kafka's wire protocol here (docs/kafka-clients.md), e.g. 127.0.0.1:9092")
    p.add_argument("--kafka-advertised", metavar="HOST:PORT",
                   help="the address Kafka clients are told to connect to (default: the listener's)")
    p.add_argument("--sasl-file", metavar="FILE",
                   help="JSON of SASL users for the Kafka listener (PLAIN, SCRAM-SHA-256/512; docs/kafka-clients.md)")
    p.add_argument("--auto-create-topics-enable", choices=("true", "false"), metavar="true|false",
                   help="Kafka's auto.create.topics.enable: Metadata naming a topic that does not exist creates it "
                        "with --num-partitions partitions (default true, as in Kafka)")
    p.add_argument("--num-partitions", type=int, metavar="N",
                   help="Kafka's num.partitions: partitions of auto-created topics and of CreateTopics with -1 "
                        "(default 1)")
    p.add_argument("--fetch-max-bytes", type=int, metavar="BYTES",
                   help="Kafka's fetch.max.bytes: the most record bytes of one Fetch answer, whatever the "
                        "request asks (default 57671680, 55 MiB)")
    p.add_argument("--sasl-server-max-receive-size", type=int, metavar="BYTES",
                   help="Kafka's sasl.server.max.receive.size: the largest Kafka frame before SASL "
                        "authentication; a larger one closes the connection (default 524288)")
    p.add_argument("--linger-ms", type=float, metavar="MS", help="group-commit linger (default 5)")
    p.add_argument("--batch-size", type=int, metavar="BYTES", help="commit once this many bytes are pending")
    p.add_argument("--buffer-memory", type=int, metavar="BYTES",
                   help="pending bytes above which produce answers 429 (back-pressure; default 64 MiB, 256 MiB on an object store)")
    p.add_argument("--eager-uploads", action="store_true", default=None,
                   help="object stores: a partition's next group uploads while its last one does, unless that one "
                        "filled --batch-size (lower latency for more PUTs; docs/storage.md)")
    p.add_argument("--max-request-bytes", type=int, metavar="BYTES", help="largest request body (413 above)")
    p.add_argument("--access-log", action="store_true", help="log every request (off by default: it costs)")
    p.add_argument("--group-initial-rebalance-delay-ms", type=int, metavar="MS",
                   help="Kafka's group.initial.rebalance.delay.ms: how long a new classic group waits for more "
                        "members before its first rebalance (default 3000; docs/consumer-groups.md)")
    p.add_argument("--node-id", type=int, metavar="N",
                   help="several fronts on one root: this front's Kafka node id (unique per front, 0-65535); "
                        "partitions are then leased to one front at a time (docs/storage.md)")
    p.add_argument("--advertised-url", metavar="URL",
                   help="with --node-id: the HTTP address other fronts and clients are told, e.g. "
                        "http://10.0.0.1:8080 (default http://HOST:PORT; needed when --host is 0.0.0.0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from api.app import create_app
    from api.request_head import uvicorn_options
    from api.settings import InvalidSetting, Settings
    from lakelog.cluster.membership import is_advertisable_url, is_unspecified_address

    try:
        settings = Settings.from_env(
            root=args.root, storage_options=key_values(args.storage_options) or None, host=args.host,
            port=args.port, auth_file=args.auth_file, linger_ms=args.linger_ms, batch_size=args.batch_size,
            buffer_memory=args.buffer_memory, eager_uploads=args.eager_uploads,
            max_request_bytes=args.max_request_bytes, node_id=args.node_id,
            group_initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
            kafka_advertised=args.kafka_advertised or args.kafka_listener, advertised_url=args.advertised_url,
            auto_create_topics_enable=None if args.auto_create_topics_enable is None
            else args.auto_create_topics_enable == "true", num_partitions=args.num_partitions,
            fetch_max_bytes=args.fetch_max_bytes, sasl_server_max_receive_size=args.sasl_server_max_receive_size)
    except InvalidSetting as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, value, least in (("--num-partitions", settings.num_partitions, 1),
                               ("LAKELOG_QUOTA_WINDOW_NUM", settings.quota_window_num, 2),
                               ("LAKELOG_QUOTA_WINDOW_SIZE_SECONDS", settings.quota_window_size_seconds, 1)):
        if value < least:
            print(f"error: {name} must be at least {least}, got {value}", file=sys.stderr)
            return 2
    if settings.advertised_url is not None and not is_advertisable_url(settings.advertised_url):
        print(f"error: --advertised-url {settings.advertised_url!r} is not http://HOST:PORT of an address other "
              "fronts and clients can connect to", file=sys.stderr)
        return 2
    if settings.node_id is not None and settings.advertised_url is None and is_unspecified_address(settings.host):
        # other fronts hand their commits to this URL and clients are sent to it: it must be one they can reach
        print(f"error: --host {settings.host} names every interface, which other fronts and clients cannot "
              "connect to; give --advertised-url http://HOST:PORT", file=sys.stderr)
        return 2
    hooks = []
    if args.kafka_listener:
        from kafka_front.listener import kafka_listener

        try:
            hooks.append(kafka_listener(args.kafka_listener, advertised=args.kafka_advertised,
                                        sasl_file=args.sasl_file, max_frame_bytes=settings.max_request_bytes,
                                        sasl_max_receive_bytes=settings.sasl_server_max_receive_size,
                                        fetch_max_bytes=settings.fetch_max_bytes))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    app = create_app(settings, on_start=hooks)  # a bad auth file fails here, before binding
    if settings.auth_file is None:
        exposure = ("reachable from this machine only" if settings.host in ("127.0.0.1", "localhost", "::1")
                    else f"REACHABLE FROM THE NETWORK on {settings.host}")
        print(f"WARNING: no --auth-file given: the front is open to every client ({exposure})",
              file=sys.stderr, flush=True)
    print(f"lakelog front on http://{settings.host}:{settings.port} (docs at /docs)"
          + (f", Kafka protocol on {args.kafka_listener}" if args.kafka_listener else ""), file=sys.stderr, flush=True)
    # uvicorn configures its own loggers only; lakelog's warnings (leases taken, commits failed) get a time, and
    # the Kafka listener's start line (INFO) says the address it bound
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka_front.listener").setLevel(logging.INFO)
    from api.kafka_frame_guard import answering_kafka_frames

    options = uvicorn_options()
    if isinstance(options.get("http"), type):  # httptools: a Kafka frame on the HTTP port gets a clear 400
        options["http"] = answering_kafka_frames(options["http"])
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=args.access_log,
                **options)
    return 0
