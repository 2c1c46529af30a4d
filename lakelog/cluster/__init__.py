"""Several fronts on one root: membership (heartbeat objects) and partition leases kept by each front."""
