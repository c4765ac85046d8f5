"""``rankwise.sdk.modes.place()`` against the table in its own docstring.

The table is parsed from ``modes.__doc__``, so the docs and the code cannot drift apart:
every row is checked on a 2-node job of 2 processes per node (N=2, M=2), and the notes
under the table on a single-node job.
"""

from __future__ import annotations

import re

import pytest

from rankwise.errors import UsageError
from rankwise.sdk import modes
from rankwise.sdk.dist import Identity

N, M = 2, 2
BASE = "b1"


def table_rows() -> list[dict[str, str]]:
    lines = modes.__doc__.splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("========")]
    edges = [(m.start(), m.end()) for m in _runs(lines[rules[0]])]
    cells = [[line[a:b].strip() for a, b in edges] for line in lines[rules[1] + 1 : rules[2]]]
    head = [lines[rules[0] + 1][a:b].strip() for a, b in edges]
    return [dict(zip(head, row, strict=True)) for row in cells]


def _runs(rule: str) -> list[re.Match[str]]:
    return list(re.finditer(r"=+", rule))


def job(nodes: int, per_node: int) -> list[Identity]:
    return [
        Identity(
            rank=node * per_node + local,
            world_size=nodes * per_node,
            local_rank=local,
            local_world_size=per_node,
            node_rank=node,
            num_nodes=nodes,
        )
        for node in range(nodes)
        for local in range(per_node)
    ]


def who_records(text: str, ident: Identity) -> bool:
    return {
        "global rank 0": ident.rank == 0,
        "local rank 0 of each node": ident.local_rank == 0,
    }.get(text, text.startswith("every rank"))


def fill(template: str, ident: Identity) -> str:
    return template.format(
        base=BASE, node=ident.node_rank, rank=ident.rank, local_rank=ident.local_rank
    )


ROWS = table_rows()


def test_the_table_has_every_mode_and_scope() -> None:
    pairs = {(row["run_mode"], row["rank_scope"]) for row in ROWS}
    assert pairs == {(m, s) for m in modes.RUN_MODES for s in modes.RANK_SCOPES}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['run_mode']}-{r['rank_scope']}")
def test_place_follows_its_table_on_two_nodes(row: dict[str, str]) -> None:
    mode, scope = row["run_mode"], row["rank_scope"]
    placed = [(ident, modes.place(BASE, ident, mode, scope)) for ident in job(N, M)]
    recorders = [(ident, p) for ident, p in placed if p.records]
    assert [i for i, _ in recorders] == [i for i, _ in placed if who_records(row["who records"], i)]
    assert len({p.run_id for _, p in recorders}) == eval(row["runs"], {"N": N, "M": M})
    for ident, p in recorders:
        assert p.run_id == fill(row["run id"], ident)
        assert p.group == (None if row["group"] == "-" else fill(row["group"], ident))
        worker = scope == "worker"
        assert p.label == (
            f"worker-{ident.node_rank}-rank-{ident.local_rank}" if worker else f"rank-{ident.rank}"
        )
    # One primary stream per run decides its state.
    for run_id in {p.run_id for _, p in recorders}:
        assert sum(p.is_primary for _, p in recorders if p.run_id == run_id) == 1


@pytest.mark.parametrize("mode", modes.RUN_MODES)
@pytest.mark.parametrize("scope", modes.RANK_SCOPES)
def test_a_single_node_job_is_named_as_under_global_scope(mode: str, scope: str) -> None:
    for ident in job(1, M):
        p = modes.place(BASE, ident, mode, scope)
        assert p.run_id == (f"{BASE}-rank-{ident.rank}" if mode == "new" else BASE)
        primary = ident.local_rank == 0 if scope == "worker" else ident.rank == 0
        assert p.is_primary is (True if mode == "new" else primary)
        assert p.records is (primary if mode == "auto" else True)


def test_explicit_group_and_label_win() -> None:
    p = modes.place(BASE, job(N, M)[3], "new", "worker", group="g", label="mine")
    assert (p.group, p.label) == ("g", "mine")


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"run_mode": "all"}, "run_mode"),
        ({"rank_scope": "node"}, "rank_scope"),
        ({"label": "a/b"}, "label"),
        ({"group": "a b"}, "group"),
    ],
)
def test_bad_arguments_are_usage_errors(kwargs: dict[str, str], word: str) -> None:
    with pytest.raises(UsageError, match=word):
        modes.place(BASE, Identity(), **kwargs)
