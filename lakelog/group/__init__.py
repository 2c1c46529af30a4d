"""Consumer groups (Kafka's group coordinator): the coordinator's membership and rebalance state
machine, the partition assignors, and the ``__consumer_offsets`` store.
"""
