"""The ``lakelog`` command line: Kafka's console and admin tools, over a storage root or a running front.

    lakelog [--root ROOT] [--storage-option KEY=VALUE ...] [--json] COMMAND ...

``topics``, ``produce``, ``consume``, ``get-offsets`` and ``groups`` read and write the root directly, or,
with ``--bootstrap-server HOST:PORT``, talk to a Kafka listener as Kafka's tools do (``produce`` and
``groups`` also take a front's HTTP address, ``--url``; :mod:`lakelog.cli.transport`).

Commands (one module of this package per group, see :data:`COMMANDS`)::

    topics create|list|describe|alter|delete     kafka-topics / kafka-configs
    produce TOPIC                                kafka-console-producer
    consume TOPIC                                kafka-console-consumer
    get-offsets TOPIC                            kafka-get-offsets
    dump-log TOPIC                               kafka-dump-log
    groups list|describe|delete|reset-offsets    kafka-consumer-groups
    serve                                        the HTTP front (FastAPI)
    maintain                                     the maintenance scheduler
    job retention|compaction|merge|vacuum        one maintenance job, via spark-submit

A command module exposes ``register(subparsers)``, which adds its parser(s)
and sets ``func(args) -> int`` on each runnable one; adding a command group is
one entry in :data:`COMMANDS`.  The global options (:mod:`.global_options`)
are added here to every parser.  Heavy imports (pyarrow, deltalake) happen
inside the command functions, so ``lakelog --help`` stays fast.

Exit codes: 0 success; 1 a Kafka error, printed as ``error: NAME (code):
message`` (with ``--json`` the error dict is also printed on stdout); 2 bad
usage; 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from lakelog.cli.global_options import add_global_options, resolve_topic

#: Command modules under ``lakelog.cli``, in ``--help`` order.
COMMANDS = ("topics", "produce", "consume", "get_offsets", "dump_log", "groups", "serve", "maintain", "job",
            "spark_jar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakelog",
        description="Apache Kafka's log on object storage as Delta Lake tables: "
                    "topic admin, console producer/consumer, offsets and segment dumps.",
        epilog="Run 'lakelog COMMAND --help' for a command's options. Docs: docs/cli.md")
    add_global_options(parser, top_level=True)
    from lakelog import __version__

    parser.add_argument("--version", action="version", version=f"lakelog {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"lakelog.cli.{name}").register(subparsers)
    _add_global_options_below(parser)
    return parser


def _add_global_options_below(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                add_global_options(sub, top_level=False)
                _add_global_options_below(sub)


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    resolve_topic(parser, args)
    from lakelog.cli.output import print_error
    from lakelog.errors import KafkaError, KafkaStorageError
    from lakelog.storage.storage_failure import is_storage_failure
    from lakelog.cli.transport import TransportUsageError
    from lakelog.storage.storage_root import InvalidStorageRoot

    try:
        return int(args.func(args) or 0)
    except KafkaError as e:
        print_error(e, as_json=args.json)
        return 1
    except (InvalidStorageRoot, TransportUsageError) as e:  # a malformed --root or storage option, found when
        getattr(args, "parser", parser).error(str(e))        # the root is opened; the wrong kind of endpoint
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except Exception as e:
        if not is_storage_failure(e):
            raise
        print_error(KafkaStorageError(f"{type(e).__name__}: {e}"), as_json=args.json)
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return 0


def console_main() -> None:
    """The ``lakelog`` console script: :func:`main`, then leave without the interpreter's teardown.

    A command that returned has written all it writes; output is flushed here.  Native libraries can abort
    in their exit-time teardown (pyarrow's S3 client, delta-rs's runtime: "terminate called without an
    active exception", exit -6, seen in CI after ``get-offsets`` had printed all its lines), which would
    turn a finished command into a crash.  An exception :func:`main` does not handle still exits normally,
    with its traceback.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader went away, or the stream was closed
            pass
    logging.shutdown()
    os._exit(code)


def _quiet_broken_pipe() -> int:
    """The reader of our stdout went away (``lakelog consume ... | head``): stop quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0
