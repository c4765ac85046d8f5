"""What the framework integrations share: starting (or reusing) the run, images and tables
the way the W&B integrations build them, and model artifacts.

Nothing here imports a framework. A tracking problem met by an integration (an artifact
that cannot be logged, an image argument rankwise does not know) is reported as a warning
and training goes on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import _log
from .._environ import scoped_env
from ..errors import ArgumentTypeError, UsageError

if TYPE_CHECKING:
    from ..media import Image, Table
    from ..sdk.run import Run


# rankwise.init()'s keywords, which an integration's **init_kwargs may pass on.
INIT_KEYWORDS = frozenset(
    (
        "project",
        "name",
        "id",
        "group",
        "job_type",
        "tags",
        "notes",
        "config",
        "run_mode",
        "rank_scope",
        "dir",
        "resume",
        "label",
        "settings",
        "server",
        "console",
        "system",
        "system_interval",
        "gpu_device_ids",
        "stall_timeout",
        "token",
    )
)


warn_once = _log.Once()


def check_init_kwargs(kwargs: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """``kwargs`` for ``rankwise.init()``; an unknown name is an ``ArgumentTypeError`` (a
    TypeError) naming the fix."""
    unknown = sorted(set(kwargs) - INIT_KEYWORDS)
    if unknown:
        raise ArgumentTypeError(
            f"{owner} got {', '.join(map(repr, unknown))}, which rankwise.init() does not "
            f"take: pass only rankwise.init()'s keywords ({', '.join(sorted(INIT_KEYWORDS))})"
        )
    return dict(kwargs)


def start_run(kwargs: Mapping[str, Any]) -> tuple[Run, bool]:
    """The run to record into: this process's current run if the program started one
    (as the W&B integrations reuse ``wandb.run``), else a new one from ``kwargs``.
    Returns the run and whether the integration owns it (and so finishes it)."""
    from ..sdk import session

    current = session.current
    if current is not None and current.state in ("running", "disabled"):
        return current, False
    return session.init(**kwargs), True


def start_again(run: Run, kwargs: Mapping[str, Any]) -> Run:
    """``run`` (which the integration started and ended) going on: a new incarnation of
    each stream, at the same placement (the base id all ranks agreed on the first time)."""
    from ..sdk import session

    base = run._start.base_id  # the same run ids, groups and labels as before
    with scoped_env(RANKWISE_SILENT="1"):  # announced when it began
        return session.init(**dict(kwargs, id=base, resume="allow"))


def ended(run: Run) -> bool:
    return run.state not in ("running", "disabled")


def check_config(config: Any) -> dict[str, Any]:
    """``config`` (a dict, argparse.Namespace, dataclass or None) as a dict for the run."""
    from ..sdk.mappings import as_config_dict

    return as_config_dict(config)


def as_id(text: str) -> str:
    """``text`` made a valid id (a group, an artifact name): characters other than
    letters, digits, ``.``, ``_`` and ``-`` become ``-``; 128 at most."""
    made = re.sub(r"[^A-Za-z0-9._-]", "-", text).strip("-._")[:128]
    return made or "x"


def artifact_name(text: str) -> str:
    """``text`` made a valid artifact name (``as_id``)."""
    return as_id(text)


# What each rich type takes per item, as lists in the W&B loggers' keyword arguments.
_OPTIONS = {"Image": ("caption",), "Audio": ("caption", "sample_rate"), "Video": ("caption", "fps")}


def media(
    kind: str, values: Sequence[Any], options: Mapping[str, Sequence[Any]], owner: str
) -> list[Any]:
    """``rankwise.Image``/``Audio``/``Video`` values from a list (arrays, tensors, PIL
    images or paths), with per-item options as lists of the same length
    (``WandbLogger.log_image``'s rules). Options rankwise has no use for (masks, boxes,
    format) are left out with a warning."""
    from .. import media as rich

    if not isinstance(values, (list, tuple)):
        raise ArgumentTypeError(f"{owner}: expected a list, found {type(values).__name__}")
    n = len(values)
    for key, per_item in options.items():
        if len(per_item) != n:
            raise UsageError(f"{owner}: expected {n} items but found {len(per_item)} for {key}")
    known = _OPTIONS[kind]
    ignored = sorted(set(options) - set(known))
    if ignored:
        warn_once(
            f"{owner}:{','.join(ignored)}",
            f"{owner}: rankwise takes {', '.join(known)} only; {', '.join(ignored)} left out",
        )
    make = getattr(rich, kind)
    return [
        make(v, **{k: options[k][i] for k in known if k in options}) for i, v in enumerate(values)
    ]


def images(values: Sequence[Any], options: Mapping[str, Sequence[Any]], owner: str) -> list[Image]:
    """``rankwise.Image``s with one caption each (see ``media``)."""
    return media("Image", values, options, owner)


def table(
    columns: Sequence[Any] | None, data: Iterable[Sequence[Any]] | None, dataframe: Any
) -> Table:
    from ..media import Table

    return Table(columns=columns, data=data, dataframe=dataframe)


def log_model(
    run: Run,
    name: str,
    files: Sequence[tuple[str, str | None]] = (),
    dirs: Sequence[str] = (),
    metadata: Mapping[str, Any] | None = None,
    aliases: Sequence[str] = (),
    wait: bool = False,
) -> Any:
    """Log ``files`` (path, name in the artifact) and ``dirs`` as a ``model`` artifact of
    ``run``. ``latest`` is left out of ``aliases``: the newest version always has it.
    ``wait``: return once the files are staged (the caller deletes them next). Returns the
    artifact, or None when it could not be logged (warned about: training goes on)."""
    if not run:
        return None
    try:
        from ..artifacts.artifact import Artifact

        artifact = Artifact(artifact_name(name), type="model", metadata=dict(metadata or {}))
        for path, as_name in files:
            artifact.add_file(os.fspath(path), name=as_name, policy="mutable")
        for path in dirs:
            artifact.add_dir(os.fspath(path))
        run.log_artifact(artifact, aliases=[a for a in aliases if a != "latest"])
        if wait:
            artifact.wait()
        return artifact
    except Exception as exc:  # tracking problems never stop training
        _log.warn(f"model artifact {name!r} of run {run.id!r} was not logged: {exc}")
        return None
