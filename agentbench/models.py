"""Base class of the records that cross stage boundaries and are written as JSON files.

Results and summaries are pydantic models (typed attribute access, validation when read, a JSON Schema
for CI consumers), written in exactly the JSON shape of agentbench 0.1. Scripts written against 0.1 read
them as dicts (``result["metrics"]["exec@1"]``), so item access, ``get`` and ``in`` keep working.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer

from .errors import ConfigError

__all__ = ["Record"]


class Record(BaseModel):
    """A JSON record: typed fields, unknown fields kept (files from a newer agentbench still load)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset()
    """Fields that are absent from the JSON (not null) when None, as optional sections were in 0.1."""

    @model_serializer(mode="wrap")
    def _omit(self, handler: Any) -> Any:
        data = handler(self)
        for name in self.OMIT_IF_NONE:
            field = type(self).model_fields.get(name)
            key = (field.alias or name) if field is not None else name
            if data.get(key, ...) is None:
                del data[key]
        return data

    @classmethod
    def from_json_data(cls, data: dict[str, Any], source: object) -> Any:
        """``data`` read from ``source`` (a file) as this record; a mismatch is a one-line ConfigError."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"{source} is not a valid {cls.__name__} ({where}: {first['msg']})") from None

    def to_json_dict(self) -> dict[str, Any]:
        """The record as written to disk."""
        return self.model_dump(by_alias=True)

    # ------------------------------------------------------------------ dict-style reading (0.1 scripts)

    def _key(self, key: str) -> str:
        for name, field in type(self).model_fields.items():
            if field.alias == key:
                return name
        return key

    def __getitem__(self, key: str) -> Any:
        name = self._key(key)
        if name in type(self).model_fields or name in (self.__pydantic_extra__ or {}):
            value = getattr(self, name)
            if value is None and name in self.OMIT_IF_NONE:
                raise KeyError(key)
            return value
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, ...) is not ...

    def keys(self) -> list[str]:
        return list(self.to_json_dict())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict):  # a record read back from its JSON equals the record
            return self.to_json_dict() == other
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment] - mutable, like the dicts it replaces
