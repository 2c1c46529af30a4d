"""Client quotas as Kafka enforces them: entities and precedence, the sampled-rate sensor, a front's manager."""
