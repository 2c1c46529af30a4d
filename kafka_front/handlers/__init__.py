"""Request handlers, one module per API family; each handler returns the response as plain values
(:func:`kafka_front.messages.build`)."""
