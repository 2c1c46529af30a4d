"""lakelog's HTTP front (FastAPI): ``create_app(settings)`` in :mod:`api.app`; run it with ``lakelog serve``."""
