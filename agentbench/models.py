"""Base class of the records that cross stage boundaries and are written as JSON files.

Results and summaries are pydantic models: typed attribute access (``result.metrics["exec@1"]``,
``summary.conditions["rag"].pass_rate``), validation when read, and a JSON Schema for CI consumers. They
are written in exactly the JSON shape agentbench has always written; :meth:`Record.to_json_dict` gives that
form for code that wants plain dicts.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer

from .errors import ConfigError

__all__ = ["Record"]


class Record(BaseModel):
    """A JSON record: typed fields, unknown fields kept (files from a newer agentbench still load)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, use_attribute_docstrings=True)
    """Unknown fields are kept; the docstring under each field is its description in ``docs/schema``."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset()
    """Fields that are absent from the JSON (not null) when None: optional sections, and fields only some
    writers have."""

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
