"""The wire in one place: every struct a reply carries is declared in ``rankwise.wire``,
under a name no other reply struct has (the OpenAPI document names components by it)."""

from __future__ import annotations

import msgspec
import msgspec.inspect

from rankwise.server.openapi import STRUCTS, _structs, struct_components

# The artifact manifest is a value with its own digest rules (``rankwise.artifacts.manifest``);
# a version's reply carries it as it is.
ELSEWHERE = {"rankwise.artifacts.manifest"}


def _reachable() -> list[type[msgspec.Struct]]:
    return list(_structs(msgspec.inspect.multi_type_info(STRUCTS)))


def test_every_reply_struct_is_declared_in_rankwise_wire() -> None:
    found = _reachable()
    assert len(found) > 50
    outside = [
        f"{c.__module__}.{c.__name__}"
        for c in found
        if not c.__module__.startswith("rankwise.wire.") and c.__module__ not in ELSEWHERE
    ]
    assert outside == []


def test_reply_struct_names_are_unique() -> None:
    names = [c.__name__ for c in _reachable()]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
    assert set(names) <= set(struct_components())
