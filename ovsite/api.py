"""Shared pieces of the HTTP layer: strict serializers and the Server-Timing header."""
import time
from contextlib import contextmanager

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Rejects fields it does not declare (422 naming them), like OpenViking's `extra="forbid"` models.

    `accepted_ignored` names fields that clients send (the SDK's display options) and that change nothing here.
    """

    accepted_ignored: tuple[str, ...] = ()

    def to_internal_value(self, data):
        if not isinstance(data, dict) and not hasattr(data, "keys"):
            raise serializers.ValidationError({"body": ["expected a JSON object"]})
        unknown = sorted(set(data.keys()) - set(self.fields) - set(self.accepted_ignored))
        if unknown:
            raise serializers.ValidationError({name: [serializers.ErrorDetail("unknown field", code="extra_forbidden")]
                                               for name in unknown})
        return super().to_internal_value(data)


class QueryParamsSerializer(StrictSerializer):
    """For GET routes: lists arrive as repeated parameters."""

    def to_internal_value(self, data):
        if hasattr(data, "getlist"):
            data = {key: (data.getlist(key) if isinstance(self.fields.get(key), serializers.ListField)
                          else data.get(key)) for key in data.keys()}
        return super().to_internal_value(data)


class StringOrList(serializers.Field):
    """A string, a comma-separated string, or a list of strings → list of stripped, non-empty strings."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            return [part.strip() for part in data.split(",") if part.strip()]
        if isinstance(data, list) and all(isinstance(item, str) for item in data):
            return [item.strip() for item in data if item.strip()]
        raise serializers.ValidationError("expected a string or a list of strings")

    def to_representation(self, value):
        return value


def parse(serializer_class, data, **kwargs) -> dict:
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class Timings:
    """Collects stage durations for the `Server-Timing` header (never the body: equal requests, equal bytes)."""

    def __init__(self):
        self._stages: list[tuple[str, float]] = []

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self._stages.append((name, (time.perf_counter() - start) * 1000))

    def header(self) -> dict:
        return {"Server-Timing": ", ".join(f"{name};dur={ms:.2f}" for name, ms in self._stages)}
