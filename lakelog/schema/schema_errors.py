"""The Schema Registry's errors, with Confluent's error codes and HTTP statuses.

Confluent's registry answers every failure as ``{"error_code": <code>, "message": <text>}`` with the HTTP status
``code // 100`` for five-digit codes (40401 -> 404) and the code itself for three-digit ones (409, 422).
"""

from __future__ import annotations


class SchemaRegistryError(Exception):
    """Base of the registry's errors: ``error_code`` is Confluent's."""

    error_code = 50001

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def http_status(self) -> int:
        return self.error_code if self.error_code < 1000 else self.error_code // 100

    def to_dict(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


class SubjectNotFound(SchemaRegistryError):
    """The subject does not exist (or all its versions are soft-deleted)."""

    error_code = 40401


class VersionNotFound(SchemaRegistryError):
    """The subject has no such version."""

    error_code = 40402


class SchemaNotFound(SchemaRegistryError):
    """No schema has that id, or the subject has no version with that schema."""

    error_code = 40403


class SubjectSoftDeleted(SchemaRegistryError):
    """The subject was soft-deleted; ``permanent=true`` deletes it for good."""

    error_code = 40404


class SubjectNotSoftDeleted(SchemaRegistryError):
    """A permanent delete of a subject that was not soft-deleted first."""

    error_code = 40405


class VersionSoftDeleted(SchemaRegistryError):
    """The version was soft-deleted; ``permanent=true`` deletes it for good."""

    error_code = 40406


class VersionNotSoftDeleted(SchemaRegistryError):
    """A permanent delete of a version that was not soft-deleted first."""

    error_code = 40407


class SubjectCompatibilityNotConfigured(SchemaRegistryError):
    """The subject has no compatibility level of its own."""

    error_code = 40408


class SubjectModeNotConfigured(SchemaRegistryError):
    """The subject has no mode of its own."""

    error_code = 40409


class IncompatibleSchema(SchemaRegistryError):
    """The schema breaks the subject's compatibility level."""

    error_code = 409


class UnprocessableEntity(SchemaRegistryError):
    """The request body is not what the endpoint takes (malformed JSON, wrong field types)."""

    error_code = 422


class InvalidSchema(SchemaRegistryError):
    """The schema does not parse, breaks its format's rules or lakelog's limits, or names missing references."""

    error_code = 42201


class InvalidVersion(SchemaRegistryError):
    """A version that is neither an integer from 1 up, -1 nor ``latest``."""

    error_code = 42202


class InvalidCompatibilityLevel(SchemaRegistryError):
    """Not one of BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE."""

    error_code = 42203


class InvalidMode(SchemaRegistryError):
    """Not one of READWRITE, READONLY, READONLY_OVERRIDE, IMPORT, or a mode change that is not allowed now."""

    error_code = 42204


class OperationNotPermitted(SchemaRegistryError):
    """The mode forbids the operation (a write in READONLY; a registration without an id in IMPORT, ...)."""

    error_code = 42205


class ReferenceExists(SchemaRegistryError):
    """The version is referenced by another schema and cannot be deleted."""

    error_code = 42206


class IdMismatch(SchemaRegistryError):
    """An import whose id is already taken by another schema."""

    error_code = 42207


class InvalidSubject(SchemaRegistryError):
    """A subject name that is empty, too long or holds control characters."""

    error_code = 42208


class StoreError(SchemaRegistryError):
    """The registry's store (the ``_schemas`` topic) could not be read or written; retry."""

    error_code = 50001


class StoreTimeout(SchemaRegistryError):
    """A write to the store kept losing to concurrent writers; retry."""

    error_code = 50002
