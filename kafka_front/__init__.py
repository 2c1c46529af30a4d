"""The Kafka wire-protocol front: a listener in the ``lakelog serve`` process speaking Kafka's binary protocol
over the same :class:`~lakelog.Log`, group coordinator, ACLs and metrics as the HTTP front (docs/kafka-clients.md)."""
