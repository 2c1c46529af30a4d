"""DuckDB with its Delta extension, a Delta reader nobody here wrote: the extension comes from PyPI (the
``duckdb-extension-delta`` test extra, built for the pinned DuckDB), never downloaded at run time."""

from __future__ import annotations

from pathlib import Path


def connect():
    """A DuckDB connection with ``delta_scan`` loaded."""
    import duckdb
    import duckdb_extension_delta

    extension = next(Path(duckdb_extension_delta.__file__).parent.glob("extensions/*/delta.duckdb_extension"))
    con = duckdb.connect()
    con.execute(f"LOAD '{extension}'")
    return con
