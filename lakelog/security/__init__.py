"""Kafka's security model over a root: ACLs (Kafka's authorizer) and SCRAM credentials."""
