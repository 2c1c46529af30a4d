"""Kafka transactions on lakelog: the coordinator, its state log, and the staging of a transaction's writes."""
