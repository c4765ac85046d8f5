"""What ran: a run's git state, program and packages, and each node's environment.

Recorded at ``init()`` (``rankwise.sdk.provenance``) in ``Provenance`` records; a run
reply carries them as ``code`` (the primary's) and ``nodes`` (one per node). Every field
may be missing: a switch turned it off, the program is not in a git repository, or the
capture ran out of time (``note`` says which).
"""

from __future__ import annotations

import msgspec


class GitInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The repository the program ran from. ``remote`` has any credentials stripped.
    ``diff_digest`` names the blob holding ``git diff HEAD`` (tracked files;
    ``diff_size`` bytes, cut at ``rankwise.sdk.provenance.MAX_DIFF`` with
    ``diff_truncated``)."""

    commit: str | None = None
    branch: str | None = None
    remote: str | None = None
    root: str | None = None
    dirty: bool | None = None
    diff_digest: str | None = None
    diff_size: int = 0
    diff_truncated: bool = False


class CodeInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The primary's program: its path, command line, git state and packages
    (``name`` -> version, the ``pip freeze`` of its environment)."""

    program: str | None = None
    argv: list[str] = msgspec.field(default_factory=list)
    cwd: str | None = None
    git: GitInfo | None = None
    packages: dict[str, str] | None = None
    note: str | None = None


class NodeInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One node's environment, from its local rank 0. ``env`` holds the launcher and
    library variables (``CUDA_*``, ``NCCL_*``, ``TORCH_*`` ...), never a secret-looking
    one (``rankwise.sdk.provenance.recorded_env``)."""

    node: int = 0
    host: str = ""
    os: str | None = None
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    driver: str | None = None
    gpus: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
