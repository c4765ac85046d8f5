"""A run's ``code`` and ``nodes`` (``rankwise.wire.code``) from its streams'
``Provenance`` records, for the local reader and the store alike."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ..wire.code import CodeInfo, GitInfo, NodeInfo

# ``rankwise.read.fold.StreamFacts`` (not imported: fold imports this module).
StreamFacts = Any


def code_of(ordered: Iterable[StreamFacts]) -> CodeInfo | None:
    """The run's ``code``: the last ``run``-scope record of ``ordered`` (primary last)."""
    found = None
    for s in ordered:
        rec = s.provenance.get("run")
        if rec is not None and (found is None or s.is_primary or rec.time >= found.time):
            found = rec
    if found is None:
        return None
    info = dict(found.info)
    git = info.pop("git", None)
    try:
        code = msgspec.convert(info, CodeInfo, strict=False)
        if isinstance(git, dict):
            code.git = msgspec.convert(git, GitInfo, strict=False)
    except msgspec.ValidationError:  # another writer's odd fields: what converts
        code = CodeInfo(note="what ran could not be read")
    if code.git is not None and found.diff_digest:
        code.git.diff_digest, code.git.diff_size = found.diff_digest, found.diff_size
    return code


def nodes_of(facts: Iterable[StreamFacts]) -> list[NodeInfo]:
    """One ``NodeInfo`` per node (the latest record of each), in node order."""
    by_node: dict[tuple[int, str], tuple[float, NodeInfo]] = {}
    for s in facts:
        rec = s.provenance.get("node")
        if rec is None or s.start is None:
            continue
        fields = NodeInfo.__struct_fields__
        info: dict[str, Any] = {k: v for k, v in rec.info.items() if k in fields}
        info["node"] = s.start.node_rank
        try:
            node = msgspec.convert(info, NodeInfo, strict=False)
        except msgspec.ValidationError:
            node = NodeInfo(node=s.start.node_rank, host=str(rec.info.get("host", "")))
        key = (s.start.node_rank, node.host)
        held = by_node.get(key)
        if held is None or rec.time >= held[0]:
            by_node[key] = (rec.time, node)
    return [n for _, (_, n) in sorted(by_node.items())]
