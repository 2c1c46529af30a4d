"""The broker layer under both fronts: what a request does once its wire format is decoded.

Authorization (principals and ACLs), the produce pipeline, topic metadata, the fetch, offset and topic
administration services, the mapping of any exception to a Kafka error, and the metrics. The HTTP front
(``api/``) and the Kafka front (``kafka_front/``) decode their wire formats, call this layer and encode its
answers; they never import each other, and this package imports neither (nor FastAPI).
"""
