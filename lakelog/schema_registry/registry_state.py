"""The registry's state: subjects, versions, schema ids, compatibility levels and modes, as the ``_schemas``
records (:mod:`registry_records`) build it, in log order.

Every write to ``_schemas`` was planned on the state of all the records before it (a conditional append,
:mod:`schema_registry`), so replaying the log needs no conflict rules: each record is applied as it stands,
and every front that reads the same records holds the same state. Not thread-safe (the registry's lock).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakelog.schema.parsed_schema import SchemaReference
from lakelog.schema_registry.registry_records import (CONFIG, MODE, SCHEMA, SchemaValue, decode_key,
                                                       decode_schema_value, decode_setting)


@dataclass(frozen=True)
class StoredSchema:
    """A schema id's content: what ``GET /schemas/ids/{id}`` answers."""

    id: int
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...]

    def identity(self) -> tuple:
        return (self.schema_type, self.schema, self.references)


@dataclass
class RegistryState:
    """Subjects -> version -> :class:`SchemaValue`; ids -> :class:`StoredSchema`; settings by subject (None:
    global). ``position`` is the log offset after the last record applied."""

    subjects: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    ids: dict[tuple, int] = field(default_factory=dict)  # identity -> id
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    position: int = 0

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """Apply the record at ``offset`` (records that are not the registry's are skipped)."""
        self.position = max(self.position, offset + 1)
        k = decode_key(key)
        if k is None:
            return
        kind, subject, version = k
        if kind == SCHEMA:
            versions = self.subjects.setdefault(subject, {})
            if value is None:  # a permanent delete; the id goes with its last version
                gone = versions.pop(version, None)
                if not versions:
                    del self.subjects[subject]
                if gone is not None and not self.usages(gone.id, deleted=True):
                    stored = self.schemas.pop(gone.id, None)
                    if stored is not None and self.ids.get(stored.identity()) == gone.id:
                        del self.ids[stored.identity()]
                return
            v = decode_schema_value(value)
            if v is None or v.subject != subject or v.version != version or v.id < 1:
                return
            versions[version] = v
            stored = StoredSchema(v.id, v.schema_type, v.schema, v.references)
            if v.id not in self.schemas:
                self.schemas[v.id] = stored
                self.ids.setdefault(stored.identity(), v.id)
            self.max_id = max(self.max_id, v.id)
        else:
            settings = self.configs if kind == CONFIG else self.modes
            setting = decode_setting(value, "compatibilityLevel" if kind == CONFIG else "mode") if value else None
            if setting is None:
                settings.pop(subject, None)
            else:
                settings[subject] = setting

    # -- queries ---------------------------------------------------------------------------
    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions in order (soft-deleted ones too with ``deleted``)."""
        found = self.subjects.get(subject) or {}
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def live_subjects(self) -> list[str]:
        return sorted(s for s, vs in self.subjects.items() if any(not v.deleted for v in vs.values()))

    def referrers(self, subject: str, version: int) -> list[int]:
        """Ids of the schemas (in live or soft-deleted versions) that reference ``subject`` version ``version``."""
        out = set()
        for versions in self.subjects.values():
            for v in versions.values():
                if any(r.subject == subject and r.version == version for r in v.references):
                    out.add(v.id)
        return sorted(out)

    def usages(self, schema_id: int, *, deleted: bool = False) -> list[SchemaValue]:
        """Every subject version holding ``schema_id``."""
        return [v for s in sorted(self.subjects) for v in self.versions(s, deleted=deleted) if v.id == schema_id]
