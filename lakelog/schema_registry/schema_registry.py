"""The Schema Registry: Confluent's subjects, versions, global ids, compatibility levels and modes, stored in the
root as records of the internal topic ``_schemas`` (Confluent's ``kafkastore.topic``, in its record format).

Reads answer from the state replayed from ``_schemas``, never staler than a fraction of a second and re-read
before answering "not found"; writes are conditional appends, so ids stay globally unique and versions dense
however many fronts register at once (:mod:`lakelog.schema_registry.schema_store`).

Thread-safe: the store serialises state changes and reads of the log tail; parsed schemas are cached by id.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from lakelog.schema.compatibility import DEFAULT_LEVEL, LEVELS, NONE, against, incompatibilities
from lakelog.schema.parsed_schema import SCHEMA_TYPES, ParsedSchema, SchemaReference
from lakelog.schema.schema_errors import (IdMismatch, IncompatibleSchema, InvalidCompatibilityLevel, InvalidMode,
                                          InvalidSchema, InvalidVersion, OperationNotPermitted, ReferenceExists,
                                          SchemaNotFound, SchemaRegistryError, SubjectCompatibilityNotConfigured,
                                          SubjectModeNotConfigured, SubjectNotFound, SubjectNotSoftDeleted,
                                          SubjectSoftDeleted, VersionNotFound, VersionNotSoftDeleted,
                                          VersionSoftDeleted)
from lakelog.schema.schema_formats import parse_schema
from lakelog.schema.schema_limits import MAX_REFERENCE_DEPTH, MAX_REFERENCES
from lakelog.schema_registry.registry_records import (MAX_VERSION, SchemaValue, check_subject, config_key,
                                                       config_value, mode_key, mode_value, parse_version, schema_key)
from lakelog.schema_registry.registry_state import RegistryState, StoredSchema
from lakelog.schema_registry.schema_store import READ_STALENESS_S, RegistryLog, SchemaStore

READWRITE, READONLY, READONLY_OVERRIDE, IMPORT = "READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"
MODES = (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT)
MISS_REFRESH_S = 0.05  # at most one re-read per this interval for ids nobody registered (hostile producers)
PARSED_CACHE = 4096  # parsed schemas kept by id (ids never change content)


@dataclass(frozen=True)
class Registered:
    """A subject version as the API shows it."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str
    references: tuple[SchemaReference, ...]

    @classmethod
    def of(cls, v: SchemaValue) -> "Registered":
        return cls(v.subject, v.version, v.id, v.schema, v.schema_type, v.references)


class SchemaRegistry:
    """The registry over one root. ``default_level``: the global compatibility level until one is set."""

    def __init__(self, log: RegistryLog, *, default_level: str = DEFAULT_LEVEL) -> None:
        self.log = log
        self.default_level = default_level
        self._lock = threading.Lock()  # the parsed-schema cache's
        self._parsed: OrderedDict[int, ParsedSchema] = OrderedDict()
        self.store = SchemaStore(log, on_reset=self._forget_parsed)

    def _forget_parsed(self) -> None:
        with self._lock:
            self._parsed.clear()

    def refresh(self, *, max_age_s: float = 0.0) -> RegistryState:
        """The state, re-read from ``_schemas`` if older than ``max_age_s`` (:meth:`SchemaStore.refresh`)."""
        return self.store.refresh(max_age_s=max_age_s)

    def _read(self) -> RegistryState:
        return self.store.refresh(max_age_s=READ_STALENESS_S)


    # -- parsing -----------------------------------------------------------------------------------
    def parse(self, schema_type: str, text: str, references: tuple[SchemaReference, ...] = (),
              state: RegistryState | None = None) -> ParsedSchema:
        """``text`` parsed with its references resolved against the registry (``42201`` on any fault)."""
        state = state or self._read()
        return self._parse(state, schema_type, text, references, 0, [0])

    def _parse(self, state, schema_type, text, references, depth, count) -> ParsedSchema:
        """Parse with references resolved; the chain below a schema (its ``reference_depth``) and the references
        it pulls in (``reference_count``, transitive) are bounded, cached dependencies included."""
        if depth > MAX_REFERENCE_DEPTH:
            raise InvalidSchema(f"references nest deeper than {MAX_REFERENCE_DEPTH}")
        deps = {}
        for ref in references:
            target = self._reference_target(state, ref)
            deps[ref.name] = self._parsed_id(state, target.id, depth + 1, count)
        below = max((getattr(d, "reference_depth", 0) for d in deps.values()), default=-1) + 1
        pulled = len(deps) + sum(getattr(d, "reference_count", 0) for d in deps.values())
        if below > MAX_REFERENCE_DEPTH:
            raise InvalidSchema(f"references nest deeper than {MAX_REFERENCE_DEPTH}")
        if pulled > MAX_REFERENCES:
            raise InvalidSchema(f"the schema has more than {MAX_REFERENCES} references, direct and transitive")
        parsed = parse_schema(schema_type, text, references, deps)
        parsed.reference_depth, parsed.reference_count = below if deps else 0, pulled
        return parsed

    @staticmethod
    def _reference_target(state: RegistryState, ref: SchemaReference) -> SchemaValue:
        versions = state.versions(ref.subject, deleted=True)
        found = ([v for v in versions if not v.deleted][-1:] if ref.version == -1
                 else [v for v in versions if v.version == ref.version])
        if not found:
            raise InvalidSchema(f"the reference {ref.name!r} names subject {ref.subject!r} version {ref.version}, "
                                f"which does not exist")
        return found[0]

    def _parsed_id(self, state: RegistryState, schema_id: int, depth: int = 0, count=None) -> ParsedSchema:
        with self._lock:
            cached = self._parsed.get(schema_id)
            if cached is not None:
                self._parsed.move_to_end(schema_id)
                return cached
        stored = state.schemas[schema_id]
        parsed = self._parse(state, stored.schema_type, stored.schema, stored.references, depth, count or [0])
        with self._lock:
            self._parsed[schema_id] = parsed
            while len(self._parsed) > PARSED_CACHE:
                self._parsed.popitem(last=False)
        return parsed

    # -- lookups for the writer (lakelog.schema.record_typing.SchemaLookup) ----------------------------
    def schema_by_id(self, schema_id: int) -> ParsedSchema | None:
        """The parsed schema of ``schema_id``, or None if no schema has it (re-read at most every
        :data:`MISS_REFRESH_S` for an unknown id)."""
        with self._lock:
            cached = self._parsed.get(schema_id)
        if cached is not None:
            return cached
        state = self.store.state
        if schema_id not in state.schemas:
            state = self.store.refresh(max_age_s=MISS_REFRESH_S)
        if schema_id not in state.schemas:
            return None
        try:
            return self._parsed_id(state, schema_id)
        except SchemaRegistryError:
            return None  # (registered before a reference vanished: it cannot be used)

    def subjects_of(self, schema_id: int) -> set[str]:
        """Subjects with a version (live or soft-deleted) holding ``schema_id``."""
        return {v.subject for v in self.store.state.usages(schema_id, deleted=True)}

    def latest_schema(self, subject: str) -> tuple[int, ParsedSchema] | None:
        """The id and schema of the subject's latest live version, or None."""
        state = self._read()
        live = state.versions(subject)
        if not live:
            return None
        return live[-1].id, self._parsed_id(state, live[-1].id)

    # -- schemas by id ---------------------------------------------------------------------------
    def schema(self, schema_id: int) -> StoredSchema:
        state = self.store.missing(lambda s: schema_id in s.schemas)
        stored = state.schemas.get(schema_id)
        if stored is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return stored

    def max_id(self) -> int:
        return self._read().max_id

    def id_usages(self, schema_id: int, *, deleted: bool = False) -> list[SchemaValue]:
        self.schema(schema_id)
        return self._read().usages(schema_id, deleted=deleted)

    def all_schemas(self, *, prefix: str = "", deleted: bool = False, latest_only: bool = False) -> list[Registered]:
        state = self._read()
        out = []
        for subject in sorted(state.subjects):
            if not subject.startswith(prefix):
                continue
            versions = state.versions(subject, deleted=deleted)
            out += [Registered.of(v) for v in (versions[-1:] if latest_only else versions)]
        return out

    # -- subjects and versions -------------------------------------------------------------------
    def subjects(self, *, prefix: str = "", deleted: bool = False, deleted_only: bool = False) -> list[str]:
        state = self._read()
        out = []
        for subject, versions in sorted(state.subjects.items()):
            live = any(not v.deleted for v in versions.values())
            gone = any(v.deleted for v in versions.values())
            if subject.startswith(prefix) and ((deleted_only and gone) or (not deleted_only and (live or deleted))):
                out.append(subject)
        return out

    def versions(self, subject: str, *, deleted: bool = False, deleted_only: bool = False) -> list[int]:
        check_subject(subject)
        state = self.store.missing(lambda s: bool(s.versions(subject)))
        versions = state.versions(subject, deleted=deleted or deleted_only)
        if deleted_only:
            versions = [v for v in versions if v.deleted]
        if not versions and not (deleted or deleted_only):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        if not state.versions(subject, deleted=True):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        return [v.version for v in versions]

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> Registered:
        check_subject(subject)
        wanted = parse_version(version)
        state = self.store.missing(lambda s: _find(s, subject, wanted, deleted) is not None)
        return Registered.of(self._find_or_raise(state, subject, wanted, deleted))

    @staticmethod
    def _find_or_raise(state: RegistryState, subject: str, wanted: int, deleted: bool) -> SchemaValue:
        found = _find(state, subject, wanted, deleted)
        if found is not None:
            return found
        if not state.versions(subject, deleted=deleted):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        raise VersionNotFound(f"Version {wanted if wanted > 0 else 'latest'} not found.")

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        target = self.version(subject, version, deleted=True)
        return self._read().referrers(subject, target.version)

    def lookup(self, subject: str, schema_type: str, text: str, references=(), *, normalize: bool = False,
               deleted: bool = False) -> Registered:
        """The subject's version holding this schema (``POST /subjects/{subject}``)."""
        check_subject(subject)
        state = self.store.missing(lambda s: bool(s.versions(subject, deleted=deleted)))
        if not state.versions(subject, deleted=deleted):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        parsed = self.parse(schema_type, text, references, state)
        identity = (schema_type, parsed.normalized() if normalize else parsed.canonical, parsed.references)
        for v in reversed(state.versions(subject, deleted=deleted)):
            if (v.schema_type, v.schema, v.references) == identity or \
                    self._same(state, v, parsed):
                return Registered.of(v)
        raise SchemaNotFound("Schema not found")

    def _same(self, state: RegistryState, v: SchemaValue, parsed: ParsedSchema) -> bool:
        """Whether version ``v`` holds ``parsed`` (compared by canonical form, references included)."""
        if v.schema_type != parsed.schema_type or v.references != parsed.references:
            return False
        try:
            return self._parsed_id(state, v.id).canonical == parsed.canonical
        except SchemaRegistryError:
            return False

    # -- registration --------------------------------------------------------------------------------
    def register(self, subject: str, schema_type: str, text: str, references=(), *, normalize: bool = False,
                 schema_id: int | None = None, version: int | None = None) -> int:
        """Register the schema under ``subject`` (``POST /subjects/{subject}/versions``); its global id.

        The same schema again (canonical form, type and references) answers the id it has; a new schema is
        checked against the subject's compatibility level (``409``), gets the id that schema has under any
        subject (else the next id) and the subject's next version. ``schema_id`` and ``version`` import a
        schema as they are (IMPORT mode only)."""
        check_subject(subject)
        if schema_type not in SCHEMA_TYPES:
            raise InvalidSchema(f"unknown schema type {schema_type!r}")
        references = tuple(references)

        def plan(state: RegistryState):
            mode = self._effective_mode(state, subject)
            if mode in (READONLY, READONLY_OVERRIDE):
                raise OperationNotPermitted(f"Subject {subject} is in read-only mode")
            if schema_id is not None and mode != IMPORT:
                raise OperationNotPermitted(f"Subject {subject} is not in import mode")
            parsed = self.parse(schema_type, text, references, state)
            stored_text = parsed.normalized() if normalize else parsed.canonical
            live = state.versions(subject)
            for v in reversed(live):
                if (v.schema_type, v.schema, v.references) == (schema_type, stored_text, references) \
                        or self._same(state, v, parsed):
                    if schema_id is not None and schema_id != v.id:
                        raise IdMismatch(f"Overwrite new schema with id {schema_id} is not permitted.")
                    return [], v.id
            identity = (schema_type, stored_text, references)
            if mode == IMPORT:
                new_id = schema_id if schema_id is not None else state.ids.get(identity, state.max_id + 1)
                taken = state.schemas.get(new_id)
                if taken is not None and taken.identity() != identity:
                    raise IdMismatch(f"Overwrite new schema with id {new_id} is not permitted.")
            else:
                level = self._effective_level(state, subject)
                for old in against(level, live):
                    problems = incompatibilities(level, parsed, self._parsed_id(state, old.id))
                    if problems:
                        raise IncompatibleSchema(
                            f"Schema being registered is incompatible with an earlier schema for subject "
                            f"\"{subject}\", details: [{', '.join(problems)}, {{oldSchemaVersion: {old.version}}}, "
                            f"{{compatibility: '{level}'}}]")
                new_id = state.ids.get(identity) or self._same_id(state, parsed) or state.max_id + 1
            every = state.versions(subject, deleted=True)
            new_version = version if version is not None else (every[-1].version + 1 if every else 1)
            if not 1 <= new_version <= MAX_VERSION:
                raise InvalidVersion(f"The specified version '{new_version}' is not a valid version id.")
            if any(v.version == new_version for v in every):
                raise OperationNotPermitted(f"Version {new_version} of subject {subject} already exists")
            value = SchemaValue(subject, new_version, new_id, stored_text, schema_type, references)
            return [(schema_key(subject, new_version), value.to_json())], new_id

        return self.store.write(plan)

    def _same_id(self, state: RegistryState, parsed: ParsedSchema) -> int | None:
        """The id of a stored schema equal to ``parsed`` in canonical form, if any (a text registered
        unnormalised may be the same schema as another's)."""
        for stored in state.schemas.values():
            if stored.schema_type == parsed.schema_type and stored.references == parsed.references:
                try:
                    if self._parsed_id(state, stored.id).canonical == parsed.canonical:
                        return stored.id
                except SchemaRegistryError:
                    continue
        return None

    def check(self, subject: str, schema_type: str, text: str, references=(), *, version: str | int | None = None,
              normalize: bool = False) -> list[str]:
        """Why the schema would break compatibility: against ``version``, or (None) against the versions the
        subject's level checks (``POST /compatibility/subjects/{subject}/versions[/{version}]``)."""
        check_subject(subject)
        state = self.store.missing(lambda s: bool(s.versions(subject)))
        parsed = self.parse(schema_type, text, tuple(references), state)
        level = self._effective_level(state, subject)
        if version is None:
            olds = against(level, state.versions(subject))
        else:
            olds = [self._find_or_raise(state, subject, parse_version(version), False)]
        out = []
        for old in olds:
            out += incompatibilities(level if level != NONE else NONE, parsed, self._parsed_id(state, old.id))
        return out

    # -- deletes ---------------------------------------------------------------------------------------
    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft-delete every live version (or, ``permanent``, remove the soft-deleted subject for good, with its
        settings); the versions deleted."""
        check_subject(subject)

        def plan(state: RegistryState):
            self._check_writable(state, subject)
            every = state.versions(subject, deleted=True)
            if not every:
                raise SubjectNotFound(f"Subject '{subject}' not found.")
            live = [v for v in every if not v.deleted]
            for v in every:
                if state.referrers(subject, v.version):
                    raise ReferenceExists(f"One or more references exist to the schema "
                                          f"{{magic=1,keytype=SCHEMA,subject={subject},version={v.version}}}.")
            if permanent:
                if live:
                    raise SubjectNotSoftDeleted(f"Subject '{subject}' was not deleted first before being "
                                                f"permanently deleted")
                records = [(schema_key(subject, v.version), None) for v in every]
                if subject in state.configs:
                    records.append((config_key(subject), None))
                if subject in state.modes:
                    records.append((mode_key(subject), None))
                return records, [v.version for v in every]
            if not live:
                raise SubjectSoftDeleted(f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                                         f"permanently")
            return ([(schema_key(subject, v.version), _deleted(v).to_json()) for v in live],
                    [v.version for v in live])

        return self.store.write(plan)

    def delete_version(self, subject: str, version: str | int, *, permanent: bool = False) -> int:
        check_subject(subject)
        wanted = parse_version(version)

        def plan(state: RegistryState):
            self._check_writable(state, subject)
            v = self._find_or_raise(state, subject, wanted, wanted > 0)
            if state.referrers(subject, v.version):
                raise ReferenceExists(f"One or more references exist to the schema "
                                      f"{{magic=1,keytype=SCHEMA,subject={subject},version={v.version}}}.")
            if permanent:
                if not v.deleted:
                    raise VersionNotSoftDeleted(f"Subject '{subject}' Version {v.version} was not deleted first "
                                                f"before being permanently deleted")
                return [(schema_key(subject, v.version), None)], v.version
            if v.deleted:
                raise VersionSoftDeleted(f"Subject '{subject}' Version {v.version} was soft deleted.Set "
                                         f"permanent=true to delete permanently")
            return [(schema_key(subject, v.version), _deleted(v).to_json())], v.version

        return self.store.write(plan)

    def _check_writable(self, state: RegistryState, subject: str) -> None:
        if self._effective_mode(state, subject) in (READONLY, READONLY_OVERRIDE):
            raise OperationNotPermitted(f"Subject {subject} is in read-only mode")

    # -- compatibility levels and modes -----------------------------------------------------------------
    def _effective_level(self, state: RegistryState, subject: str | None) -> str:
        return state.configs.get(subject) or state.configs.get(None) or self.default_level

    def _effective_mode(self, state: RegistryState, subject: str | None) -> str:
        return state.modes.get(subject) or state.modes.get(None) or READWRITE

    def get_config(self, subject: str | None = None, *, default_to_global: bool = False) -> str:
        if subject is None:
            return self._effective_level(self._read(), None)
        check_subject(subject)
        state = self.store.missing(lambda s: subject in s.configs)
        if subject in state.configs:
            return state.configs[subject]
        if default_to_global:
            return self._effective_level(state, None)
        raise SubjectCompatibilityNotConfigured(f"Subject '{subject}' does not have subject-level compatibility "
                                                f"configured")

    def set_config(self, subject: str | None, level: object) -> str:
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise InvalidCompatibilityLevel(f"Invalid compatibility level. Valid values are none, backward, "
                                            f"forward, full, backward_transitive, forward_transitive, and "
                                            f"full_transitive")
        level = level.upper()
        if subject is not None:
            check_subject(subject)
        return self.store.write(lambda state: ([(config_key(subject), config_value(level))]
                                          if state.configs.get(subject) != level else [], level))

    def delete_config(self, subject: str | None) -> str:
        """Remove the subject's level (or reset the global one); the level it had."""
        if subject is not None:
            check_subject(subject)

        def plan(state: RegistryState):
            if subject is not None and subject not in state.configs:
                if not state.versions(subject, deleted=True):
                    raise SubjectNotFound(f"Subject '{subject}' not found.")
                raise SubjectCompatibilityNotConfigured(f"Subject '{subject}' does not have subject-level "
                                                        f"compatibility configured")
            old = self._effective_level(state, subject)
            return ([(config_key(subject), None)] if subject in state.configs else []), old

        return self.store.write(plan)

    def get_mode(self, subject: str | None = None, *, default_to_global: bool = False) -> str:
        if subject is None:
            return self._effective_mode(self._read(), None)
        check_subject(subject)
        state = self.store.missing(lambda s: subject in s.modes)
        if subject in state.modes:
            return state.modes[subject]
        if default_to_global:
            return self._effective_mode(state, None)
        raise SubjectModeNotConfigured(f"Subject '{subject}' does not have subject-level mode configured")

    def set_mode(self, subject: str | None, mode: object, *, force: bool = False) -> str:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise InvalidMode(f"Invalid mode. Valid values are {', '.join(MODES)}.")
        mode = mode.upper()
        if subject is not None:
            check_subject(subject)

        def plan(state: RegistryState):
            if mode == IMPORT and not force:
                present = state.versions(subject, deleted=True) if subject is not None else state.subjects
                if present:
                    raise OperationNotPermitted("Cannot import since found existing subjects")
            return ([(mode_key(subject), mode_value(mode))] if state.modes.get(subject) != mode else []), mode

        return self.store.write(plan)

    def delete_mode(self, subject: str) -> str:
        check_subject(subject)

        def plan(state: RegistryState):
            if subject not in state.modes:
                raise SubjectModeNotConfigured(f"Subject '{subject}' does not have subject-level mode configured")
            return [(mode_key(subject), None)], state.modes[subject]

        return self.store.write(plan)


def _find(state: RegistryState, subject: str, wanted: int, deleted: bool) -> SchemaValue | None:
    versions = state.versions(subject, deleted=deleted)
    if wanted == -1:
        live = [v for v in versions if not v.deleted]
        return live[-1] if live else None
    return next((v for v in versions if v.version == wanted), None)


def _deleted(v: SchemaValue) -> SchemaValue:
    return SchemaValue(v.subject, v.version, v.id, v.schema, v.schema_type, v.references, deleted=True)
