"""The source's options, table-driven and without Spark: Kafka's names, precedence, defaults and messages."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidConfig
from lakelog.spark.source_options import (DEFAULT_MAX_TRIGGER_DELAY_MS, Earliest, GlobalTimestamp,
                                           InvalidSourceOption, Latest, SpecificOffsets, SpecificTimestamps,
                                           Subscription, check_batch, check_streaming, parse_duration_ms,
                                           parse_options)

SUB = {"subscribe": "orders"}


def test_defaults_batch_and_streaming():
    o = check_batch(parse_options({**SUB, "path": "/data/lake"}))
    assert o.root == "/data/lake" and o.subscription == Subscription("subscribe", topics=("orders",))
    assert o.starting == Earliest() and o.ending == Latest() and o.fail_on_data_loss and not o.include_headers
    assert o.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS == 15 * 60 * 1000
    s = check_streaming(parse_options(SUB))
    assert s.starting == Latest()  # the Kafka source's streaming default
    assert check_streaming(parse_options({**SUB, "startingoffsets": "earliest"})).starting == Earliest()


@pytest.mark.parametrize("options, expected", [
    ({"subscribe": " a, b ,,a"}, Subscription("subscribe", topics=("a", "b"))),
    ({"subscribepattern": "ord.*"}, Subscription("subscribePattern", pattern="ord.*")),
    ({"assign": '{"b":[1,0,1],"a":[2]}'}, Subscription("assign", assignment=(("a", (2,)), ("b", (0, 1))))),
])
def test_subscriptions(options, expected):
    assert parse_options(options).subscription == expected


def test_pattern_matches_whole_name():
    sub = parse_options({"subscribepattern": "ord.*"}).subscription
    assert sub.matches("orders") and not sub.matches("reorders")


@pytest.mark.parametrize("options, expected", [
    ({"startingoffsets": "EARLIEST"}, Earliest()),
    ({"startingoffsets": " latest "}, Latest()),
    ({"startingoffsets": '{"orders":{"0":5,"1":-2,"2":-1}}'},
     SpecificOffsets((("orders", 0, 5), ("orders", 1, -2), ("orders", 2, -1)))),
    ({"startingtimestamp": "1700000000000"}, GlobalTimestamp(1_700_000_000_000)),
    ({"startingoffsetsbytimestamp": '{"orders":{"0":10}}'}, SpecificTimestamps((("orders", 0, 10),))),
    # precedence: timestamp > offsetsByTimestamp > offsets
    ({"startingtimestamp": "7", "startingoffsetsbytimestamp": '{"orders":{"0":10}}', "startingoffsets": "latest"},
     GlobalTimestamp(7)),
    ({"startingoffsetsbytimestamp": '{"orders":{"0":10}}', "startingoffsets": "latest"},
     SpecificTimestamps((("orders", 0, 10),))),
])
def test_starting_specs_and_precedence(options, expected):
    assert parse_options({**SUB, **options}).starting == expected


def test_other_values():
    o = parse_options({**SUB, "failondataloss": "False", "includeheaders": "TRUE", "minpartitions": "8",
                       "maxoffsetspertrigger": "100", "minoffsetspertrigger": "10", "maxtriggerdelay": "30s",
                       "groupid": "g1", "storage.aws_region": "eu-west-1", "kafka.bootstrap.servers": "ignored:9092",
                       "startingoffsetsbytimestampstrategy": "LATEST"})
    assert (o.fail_on_data_loss, o.include_headers, o.min_partitions) == (False, True, 8)
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (100, 10, 30_000)
    assert o.group_id == "g1" and o.storage_options == (("aws_region", "eu-west-1"),) and o.strategy == "latest"


@pytest.mark.parametrize("text, ms", [("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("2h", 7_200_000),
                                      ("1000", 1000), ("1 min", 60_000)])
def test_durations(text, ms):
    assert parse_duration_ms("maxtriggerdelay", text) == ms


# (options, mode, option named by the error, a fragment of its message)
INVALID = [
    ({}, "any", "subscribe", "One of the following options must be specified"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "any", "assign", "Only one of the following options"),
    ({"subscribe": "a", "subscribepattern": "a.*"}, "any", "subscribepattern", "Only one of the following options"),
    ({"subscribe": " , "}, "any", "subscribe", "No topics to subscribe to"),
    ({"subscribepattern": "  "}, "any", "subscribepattern", "Pattern to subscribe is empty"),
    ({"subscribepattern": "(unclosed"}, "any", "subscribepattern", "not a regular expression"),
    ({"assign": "orders"}, "any", "assign", "No topicpartitions to assign"),
    ({"assign": '{"a":[0,"x"]}'}, "any", "assign", 'expected e.g. {"topicA":[0,1]'),
    ({"assign": '{"a":[0'}, "any", "assign", "expected e.g."),
    ({**SUB, "startingoffsets": '{"orders":{"0":1'}, "any", "startingoffsets", "expected e.g."),
    ({**SUB, "startingoffsets": '{"orders":[1]}'}, "any", "startingoffsets", "expected e.g."),
    ({**SUB, "startingoffsets": '{"orders":{"x":1}}'}, "any", "startingoffsets", "is not an integer"),
    ({**SUB, "startingoffsets": '{"orders":{"0":-3}}'}, "any", "startingoffsets", "-2 (earliest)"),
    ({**SUB, "startingoffsets": '{"orders":{"0":"5"}}'}, "any", "startingoffsets", "expected e.g."),
    ({**SUB, "endingoffsets": "nonsense"}, "any", "endingoffsets", "expected e.g."),
    ({**SUB, "startingtimestamp": "yesterday"}, "any", "startingtimestamp", "single long value"),
    ({**SUB, "endingtimestamp": "-5"}, "any", "endingtimestamp", ">= 0"),
    ({**SUB, "startingoffsetsbytimestamp": '{"orders":{"0":-1}}'}, "any", "startingoffsetsbytimestamp", "negative"),
    ({**SUB, "startingoffsets": '{"orders":{"0":9}}', "endingoffsets": '{"orders":{"0":3}}'}, "any",
     "endingoffsets", "before startingOffsets"),
    ({**SUB, "startingtimestamp": "9", "endingtimestamp": "3"}, "any", "endingtimestamp", "before startingTimestamp"),
    ({**SUB, "startingoffsetsbytimestampstrategy": "closest"}, "any", "startingoffsetsbytimestampstrategy",
     "expected error or latest"),
    ({**SUB, "failondataloss": "maybe"}, "any", "failondataloss", "expected true or false"),
    ({**SUB, "minpartitions": "0"}, "any", "minpartitions", "minPartitions must be positive"),
    ({**SUB, "maxoffsetspertrigger": "ten"}, "any", "maxoffsetspertrigger", "positive integer"),
    ({**SUB, "maxoffsetspertrigger": "5", "minoffsetspertrigger": "6"}, "any", "minoffsetspertrigger",
     "greater than maxOffsetsPerTrigger"),
    ({**SUB, "maxtriggerdelay": "soon"}, "any", "maxtriggerdelay", "duration"),
    ({**SUB, "groupid": " "}, "any", "groupid", "must not be empty"),
    ({**SUB, "startingoffset": "earliest"}, "any", "startingoffset", "Unknown option 'startingoffset'"),
    ({**SUB, "kafka.auto.offset.reset": "earliest"}, "any", "kafka.auto.offset.reset", "startingOffsets"),
    # mode rules
    ({**SUB, "startingoffsets": "latest"}, "batch", "startingoffsets", "can't be latest for batch"),
    ({**SUB, "startingoffsets": '{"orders":{"0":-1}}'}, "batch", "startingoffsets", "can't be latest"),
    ({**SUB, "endingoffsets": "earliest"}, "batch", "endingoffsets", "can't be earliest"),
    ({**SUB, "endingoffsets": '{"orders":{"0":-2}}'}, "batch", "endingoffsets", "can't be earliest"),
    ({**SUB, "maxoffsetspertrigger": "10"}, "batch", "maxoffsetspertrigger", "only valid in streaming"),
    ({**SUB, "minoffsetspertrigger": "10"}, "batch", "minoffsetspertrigger", "only valid in streaming"),
    ({**SUB, "maxtriggerdelay": "1m"}, "batch", "maxtriggerdelay", "only valid in streaming"),
    ({**SUB, "groupid": "g"}, "batch", "groupid", "only valid in streaming"),
    ({**SUB, "endingoffsets": "latest"}, "stream", "endingoffsets", "not valid in streaming"),
    ({**SUB, "endingtimestamp": "5"}, "stream", "endingtimestamp", "not valid in streaming"),
    ({**SUB, "endingoffsetsbytimestamp": '{"orders":{"0":5}}'}, "stream", "endingoffsetsbytimestamp",
     "not valid in streaming"),
]


@pytest.mark.parametrize("options, mode, option, fragment", INVALID)
def test_invalid_options(options, mode, option, fragment):
    with pytest.raises(InvalidSourceOption) as info:
        parsed = parse_options(options)
        if mode == "batch":
            check_batch(parsed)
        elif mode == "stream":
            check_streaming(parsed)
    assert info.value.option == option
    assert fragment in str(info.value)
    assert isinstance(info.value, InvalidConfig) and info.value.code == 40  # Kafka's INVALID_CONFIG


def test_mode_rules_accept_the_other_modes_options():
    check_streaming(parse_options({**SUB, "maxoffsetspertrigger": "10", "groupid": "g"}))
    check_batch(parse_options({**SUB, "endingoffsets": '{"orders":{"0":-1}}'}))


ISOLATION_MESSAGE = ("Invalid value for option 'kafka.isolation.level': expected read_committed or read_uncommitted, "
                     "got {}")


def test_isolation_level_python():
    for level in ("read_committed", "READ_UNCOMMITTED", " Read_Committed "):
        parse_options({**SUB, "kafka.isolation.level": level})
    with pytest.raises(InvalidSourceOption) as info:
        parse_options({**SUB, "kafka.isolation.level": "read_dirty"})
    assert info.value.option == "kafka.isolation.level" and info.value.code == 40
    assert ISOLATION_MESSAGE.format("read_dirty") in str(info.value)


@pytest.mark.parametrize("source", ["jvm", "python"])
def test_isolation_level_through_spark(spark, tmp_path, source):
    """Both sources reject a bad level with the same message and read the same rows at either level (a topic
    table never holds uncommitted or aborted transactional data)."""
    from lakelog import Log
    from lakelog.storage.storage_root import StorageRoot

    from spark_support import lakelog_reader, produce, records_of

    log = Log(StorageRoot.resolve(str(tmp_path / "root")))
    log.create_topic("orders", 2)
    produce(log, "orders", 0, 7)
    produce(log, "orders", 1, 3)
    spark.conf.set("spark.lakelog.jvm.enabled", "true" if source == "jvm" else "false")
    try:
        with pytest.raises(Exception, match=ISOLATION_MESSAGE.format("snapshot")):
            lakelog_reader(spark, log.root, subscribe="orders", **{"kafka.isolation.level": "snapshot"}) \
                .load(log.root.uri).collect()
        rows = {level: records_of(lakelog_reader(spark, log.root, subscribe="orders",
                                                 **{"kafka.isolation.level": level}).load(log.root.uri))
                for level in ("read_committed", "read_uncommitted")}
    finally:
        spark.conf.set("spark.lakelog.jvm.enabled", "true")
    assert len(rows["read_committed"]) == 10
    assert rows["read_committed"] == rows["read_uncommitted"]
