"""A consume-transform-produce service, exactly once: read ``input`` (read_committed), write ``out:<value>`` to the
same partition of ``output`` and commit the input positions inside the same transaction.

Usage: ``ctp_loop.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PARTITIONS PAUSE_S``: up to 30 records per
transaction, and a pause between transactions, so that a test's kills land mid-stream.  Exits 0 once every input
partition is consumed to its high watermark, 3 on any Kafka error (its supervisor restarts it: the new instance's
InitProducerId fences this one and aborts its open transaction, and it resumes from the committed offsets).
"""

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bootstrap, src, dst, group, tid, partitions, pause = sys.argv[1:8]
tps = [TopicPartition(src, p) for p in range(int(partitions))]
try:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "fetch.wait.max.ms": 50})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2,
                         "transaction.timeout.ms": 10000})
    producer.init_transactions(20)
    # positions kept here: the client's position() is unknown (-1001) for a partition not fetched from yet
    positions = {tp.partition: max(tp.offset, 0) for tp in consumer.committed(tps, 20)}
    consumer.assign([TopicPartition(src, p, o) for p, o in positions.items()])
    ends = {tp.partition: consumer.get_watermark_offsets(tp, 20)[1] for tp in tps}
    while True:
        msgs = [m for m in consumer.consume(30, 0.2) if not m.error()]
        if not msgs:
            if all(positions[p] >= ends[p] for p in ends):
                sys.exit(0)
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(dst, key=m.key(), value=b"out:" + m.value(), partition=m.partition())
            positions[m.partition()] = m.offset() + 1
        producer.send_offsets_to_transaction([TopicPartition(src, p, o) for p, o in positions.items()],
                                             consumer.consumer_group_metadata(), 20)
        producer.commit_transaction(20)
        time.sleep(float(pause))
except KafkaException as e:
    print(f"ctp_loop: {e}", file=sys.stderr)
    sys.exit(3)
