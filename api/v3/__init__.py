"""Confluent REST Proxy v3 on lakelog's front: ``/v3/clusters/...`` mapped onto the same services as ``/v1``.

A thin mapping layer (docs/rest-v3.md): Confluent's request and response shapes, error
codes and status rules in front of lakelog's topic service, produce service, ACL checks
and group coordinator.  Nothing here reads or writes storage on its own.
"""
