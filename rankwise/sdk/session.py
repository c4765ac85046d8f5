"""``rankwise.init()`` and the process's current run (``rankwise.run``/``log``/``finish``).

``init()`` owns each run it makes: it hands the run the process hooks' ``ending``,
registers it with the hooks once its writer runs, and attaches the helpers (uploader,
system sampler, watchdog, console capture) through ``run.handle()``. In a forked child
the hooks call ``_after_fork`` (registered below), which forgets the parent's run here.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _log
from .._version import __version__
from ..errors import RunExistsError, UsageError
from ..settings import Settings, default_dir, default_project, default_server, env_flag
from ..stream import records as R
from ..stream import streamkey
from ..stream.files import check_case_aliases, create_stream_file, list_streams, streams_dir
from ..stream.fold import pid_namespace
from ..stream.frames import scan
from . import announce, flight, hooks, provenance
from .dist import Identity, agree_base_id, check_id, detect
from .mappings import as_config_dict
from .modes import Placement, place
from .run import Run, process_start_time
from .writer import StreamWriter

if TYPE_CHECKING:
    from .node_upload import NodeUploader
    from .uploader import Uploader

current: Run | None = None
_warned_no_run = False
_said_reinit = False  # the note that init() finished the previous run is given once
_agreed = 0  # init() calls of this process that agreed a base id with the other ranks
forked_child = False  # set in a forked child: the parent's run is not this process's


def _after_fork() -> None:
    global current, forked_child, _warned_no_run
    current = None
    forked_child = True
    _warned_no_run = False


hooks.after_fork(_after_fork)

RESUME = ("allow", "must", "never")
# How long the primary rank's init() waits for the server's first answer before printing
# its line (s): a refused token then gets no link to a page that stays empty.
REFUSAL_WAIT = 3.0


def init(
    project: str | None = None,
    name: str | None = None,
    id: str | None = None,
    group: str | None = None,
    job_type: str | None = None,
    tags: Sequence[str] | None = None,
    notes: str | None = None,
    config: Any = None,
    run_mode: str = "auto",
    rank_scope: str = "global",
    dir: str | os.PathLike[str] | None = None,
    resume: str = "allow",
    label: str | None = None,
    settings: Settings | Mapping[str, Any] | None = None,
    server: str | None = None,
    console: str | None = None,
    system: bool | None = None,
    system_interval: float | None = None,
    gpu_device_ids: Sequence[int] | None = None,
    stall_timeout: float | None = None,
    token: str | None = None,
    primary: bool | None = None,
    tensorboard: bool = False,
) -> Run:
    """Start (or continue) a run on this process; call it on every rank.

    ``project`` defaults to ``RANKWISE_PROJECT`` or ``"default"``; ``dir`` to
    ``RANKWISE_DIR`` or ``./rankwise-runs``; ``id`` (the *base* id the run mode builds on) to
    ``RANKWISE_RUN_ID`` or an id all ranks of this launch agree on by themselves.
    ``label`` may use ``{rank}``, ``{local_rank}`` and ``{node}``. ``resume`` is
    ``allow`` (continue a run that exists, as a new incarnation), ``must`` or ``never``.
    Returns a ``Run`` that is falsy on processes that do not record under ``run_mode``.
    ``server`` (or ``RANKWISE_SERVER``) turns on remote mode: the stream file is still
    written, and also uploaded to that rankwise server by a background thread, with
    ``token`` (or ``RANKWISE_TOKEN``), an ingest token, as ``Authorization: Bearer``.
    Rank health, each also a setting (``RANKWISE_CONSOLE`` ...): ``console`` capture is
    ``"wrap"`` (default), ``"redirect"`` (file descriptors: C/NCCL output too) or
    ``"off"``; ``system`` metrics every ``system_interval`` seconds (10), of the GPUs
    ``gpu_device_ids`` (all); a stall is recorded after ``stall_timeout`` seconds (300)
    without ``log()``, 0 turning that off. ``primary`` overrides whether this stream is
    its run's primary (the one whose end decides the run's state; by default rank 0's):
    ``rankwise.wandb`` sets it from W&B's ``x_primary``/``x_update_finish_state``.
    ``tensorboard=True`` also records what the process writes through a TensorBoard
    ``SummaryWriter`` (``rankwise.sdk.tensorboard``; docs/tensorboard.md).
    """
    global current
    env = os.environ
    opts = Settings.resolve(settings, env).override(
        console=console,
        system=system,
        system_interval=system_interval,
        gpu_device_ids=gpu_device_ids,
        stall_timeout=stall_timeout,
        token=token,
    )
    flight.configure(bool(opts.flight_recorder))  # before the program's process group
    project = check_id(default_project(project, env), "project")
    if resume not in RESUME:
        raise UsageError(f"resume={resume!r} is not one of {', '.join(RESUME)}")
    tag_list = _tags(tags)
    config_dict = as_config_dict(config)
    root = default_dir(dir, env).absolute()

    if current is not None:
        _finish_previous(current)

    ident = detect(env)
    base = _base_id(id or env.get("RANKWISE_RUN_ID") or None, ident, env, opts)
    if label is not None:
        label = _fill_label(label, ident)
    where = place(base, ident, run_mode, rank_scope, group, label)
    if primary is not None:
        where = dataclasses.replace(where, is_primary=bool(primary))

    start = R.StreamStart(
        seq=0,
        time=0.0,
        project=project,
        run_id=where.run_id,
        label=where.label,
        incarnation=0,
        name=name,
        group=where.group,
        job_type=job_type,
        tags=tag_list,
        notes=notes,
        run_mode=run_mode,
        rank_scope=rank_scope,
        base_id=base,
        is_primary=where.is_primary,
        rank=ident.rank,
        world_size=ident.world_size,
        local_rank=ident.local_rank,
        local_world_size=ident.local_world_size,
        node_rank=ident.node_rank,
        num_nodes=ident.num_nodes,
        launcher=ident.launcher,
        heartbeat_interval=opts.heartbeat_interval,
        config=config_dict,
        rankwise_version=__version__,
    )
    if env_flag("RANKWISE_DISABLED", env) or not where.records:
        run = Run(start=start, root=root, settings=opts, writer=None, path=None)
        run.server = _server_url(default_server(server, env))
        current = run
        return run

    directory = streams_dir(root, project, where.run_id)
    check_case_aliases(root, project, where.run_id, where.label)
    _check_resume(resume, directory, where, project, ident)
    fd, path, incarnation = create_stream_file(directory, where.label, ident.restart_count)
    first_step = _previous_last_step(directory, where.label, incarnation)
    _stamp(start, incarnation, root, path)
    writer = StreamWriter(fd, start, opts.flush_interval, opts.heartbeat_interval, opts.fsync)
    run = Run(
        start=start,
        root=root,
        settings=opts,
        writer=writer,
        path=path,
        first_step=first_step,
        ending=hooks.ending,
    )
    uploader = _attach_uploader(run, writer, default_server(server, env), opts)
    _set_url(run, uploader, project, where.run_id, root)
    if where.is_primary and not env_flag("RANKWISE_SILENT", env):
        # Before console capture starts: the line is rankwise's, not the program's output.
        _announce(run, uploader, project, where.run_id, root)
    writer.start()
    hooks.register(run)
    _attach_health(run, opts)
    provenance.attach(run)
    if tensorboard:
        from . import tensorboard as tb

        tb.capture(run)
    current = run
    return run


def _set_url(
    run: Run, uploader: Uploader | NodeUploader | None, project: str, run_id: str, root: Path
) -> None:
    """The run's server (None: local mode) and the address of its page: on the server, else
    on the ``rankwise ui`` serving ``root`` (None: none known)."""
    server_url = uploader.server if uploader is not None else None
    run.server = server_url
    base_url = server_url or announce.ui_address(root)
    run.url = announce.page_url(base_url, project, run_id) if base_url else None


def _base_id(given: str | None, ident: Identity, env: Mapping[str, str], opts: Settings) -> str:
    """The base id: the one given (checked), else one all ranks of the launch agree on
    (the nth ``init()`` of each rank agrees with the nth of the others)."""
    global _agreed
    if given:
        return check_id(given)
    base = agree_base_id(ident, env, opts.store_timeout, nth=_agreed)
    _agreed += 1
    return base


def _fill_label(label: str, ident: Identity) -> str:
    """``label=`` with ``{rank}``, ``{local_rank}`` and ``{node}`` filled in."""
    try:
        return label.format(rank=ident.rank, local_rank=ident.local_rank, node=ident.node_rank)
    except (KeyError, IndexError, ValueError):
        raise UsageError(
            f"label={label!r}: only {{rank}}, {{local_rank}} and {{node}} can be filled in"
        ) from None


def _check_resume(
    resume: str, directory: Path, where: Placement, project: str, ident: Identity
) -> None:
    """``resume="never"`` refuses a stream that has data (unless this process is a restart
    of the same launch, ``restart_count`` > 0); ``"must"`` refuses a run that has none."""
    existing = [inc for lab, inc, _ in list_streams(directory) if lab == where.label]
    if resume == "never" and existing and ident.restart_count == 0:
        raise RunExistsError(
            f"run {where.run_id!r} of project {project!r} already has stream "
            f"{where.label!r} in {directory}: pass resume='allow' to continue it, or a "
            "new id"
        )
    if resume == "must" and not list_streams(directory):
        raise UsageError(
            f"resume='must' but run {where.run_id!r} has no data in {directory}: check "
            "id= and dir=, or pass resume='allow'"
        )


def _stamp(start: R.StreamStart, incarnation: int, root: Path, path: Path) -> None:
    """Fill in what the start record says of this process: its incarnation, the time,
    the host and process, Python and the command line, and the stream key's digest."""
    import time

    start.incarnation = incarnation
    start.time = time.time()
    start.host = socket.gethostname()
    start.pid = os.getpid()
    start.pid_start_time = process_start_time()
    start.pid_ns = pid_namespace()
    start.data_dir = str(root)
    start.python = platform.python_version()
    start.platform = platform.platform()
    start.argv = provenance.mask_argv([str(a) for a in sys.argv])
    start.key_digest = _stream_key(path)


def _announce(
    run: Run, uploader: Uploader | NodeUploader | None, project: str, run_id: str, root: Path
) -> None:
    """The primary's one line naming the run and where to see it. No link to a server page
    that a refused token will never fill (the uploader's first answer, a round trip,
    decides; a server that does not answer soon gets its link: the records reach it when
    it does)."""
    shown = run.url
    if uploader is not None and uploader.refused(REFUSAL_WAIT):
        shown = None
    announce.say(announce.line(project, run_id, root, shown))


def _finish_previous(previous: Run) -> None:
    """One current run per process, as in the other trackers: a second ``init()`` finishes
    the first; it says so once per process (rank 0's), since that may be a surprise."""
    global _said_reinit
    running = previous.state == "running"
    previous.finish()
    if running and not _said_reinit and (previous.rank or 0) == 0:
        _said_reinit = True
        _log.warn(
            f"rankwise.init() finished the previous run {previous.project}/{previous.id} "
            "first (one run at a time per process); call run.finish() before init() to "
            "end it yourself, or use one init() per job"
        )


def _attach_uploader(
    run: Run, writer: StreamWriter, server: str | None, opts: Settings
) -> Uploader | NodeUploader | None:
    """Remote mode: upload the stream file as it grows (see ``rankwise.sdk.uploader``).
    Returns the uploader (None in local mode)."""
    if not server or run.path is None:
        return None
    from .._http import normalize_url
    from ..stream.identity import StreamId
    from . import node_upload, orphans
    from .node_upload import NodeUploader
    from .uploader import Uploader

    server = normalize_url(server)  # a bad URL is a usage error here, not a warning later
    ref = StreamId(run.project, run.id, run.label, run.incarnation)
    own = run.path

    def adopt_orphans(deadline: float) -> None:
        # A process that ends while its job goes down uploads what dead siblings left.
        if run.state != "finished":
            orphans.adopt(server, own, deadline)

    uploader: Uploader | NodeUploader | None = None
    if opts.node_upload:
        try:
            share = node_upload.share_dir(server, opts.token, run.path.parent)
            uploader = NodeUploader(server, run.path, ref, opts, share, on_drained=adopt_orphans)
        except OSError as exc:  # no private share here: this process uploads alone
            _log.warn(f"node_upload is off for this process ({exc}); it uploads its own stream")
    if uploader is None:
        uploader = Uploader(server, run.path, ref, opts, on_drained=adopt_orphans)
    writer.flush_listeners.append(uploader.wake)
    run.add_component(uploader, after_writer=True)
    uploader.start()
    return uploader


def _server_url(server: str | None) -> str | None:
    from .._http import normalize_url

    return normalize_url(server) if server else None


def _attach_health(run: Run, opts: Settings) -> None:
    """System sampler, hang watchdog and console capture (stopped in this order)."""
    from . import console, system, watchdog

    handle = run.handle()
    if handle is None:
        return
    for part in (system, watchdog, console):
        try:
            part.attach(handle, opts)
        except Exception as exc:  # tracking problems never stop training
            _log.warn(f"{part.__name__.rsplit('.', 1)[-1]} is off: {exc!r}")


def _tags(tags: Sequence[str] | None) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str):
        return [tags]
    out = []
    for tag in tags:
        if not isinstance(tag, str):
            raise UsageError(f"tags must be strings; got {tag!r}")
        out.append(tag)
    return out


def _stream_key(path: Path) -> str | None:
    """Make the new stream's secret (``rankwise.stream.streamkey``); its digest, or None
    when it cannot be kept (the stream is then open to any holder of the ingest token,
    as an older SDK's: tracking goes on)."""
    try:
        return streamkey.create(path)
    except OSError as exc:
        _log.warn(f"cannot keep the stream's secret beside {path} ({exc}): uploading it unbound")
        return None


def _previous_last_step(directory: Path, label: str, incarnation: int) -> int:
    """Where step=None continues from in a new incarnation: the last one's last step."""
    earlier = [(inc, p) for lab, inc, p in list_streams(directory) if lab == label]
    earlier = [(inc, p) for inc, p in earlier if inc < incarnation]
    if not earlier:
        return -1
    try:
        records = scan(max(earlier)[1].read_bytes()).records
    except OSError:
        return -1
    last = -1
    for rec in records:
        if isinstance(rec, R.Metrics) and rec.step > last:
            last = rec.step
    return last


def log(
    data: Mapping[str, Any],
    step: int | None = None,
    weight: Any = None,
    commit: bool | None = None,
) -> None:
    """``run.log()`` on the current run of this process."""
    run = current
    if run is None:
        return _no_run("log")
    run.log(data, step=step, weight=weight, commit=commit)


def log_artifact(
    artifact_or_path: Any,
    name: str | None = None,
    type: str | None = None,
    aliases: Any = None,
    tags: Any = None,
) -> Any:
    """``run.log_artifact()`` on the current run of this process."""
    run = current
    if run is None:
        raise UsageError("rankwise.log_artifact() needs a run: call rankwise.init() first")
    return run.log_artifact(artifact_or_path, name=name, type=type, aliases=aliases, tags=tags)


def use_artifact(
    artifact_or_name: Any, type: str | None = None, aliases: Any = None, use_as: str | None = None
) -> Any:
    """``run.use_artifact()`` on the current run (``rankwise.Api().artifact()`` reads one
    without a run)."""
    run = current
    if run is None:
        raise UsageError(
            "rankwise.use_artifact() needs a run: call rankwise.init() first, or read it "
            "with rankwise.Api().artifact(name)"
        )
    return run.use_artifact(artifact_or_name, type=type, aliases=aliases, use_as=use_as)


def define_metric(
    name: str,
    *,
    reduce: str | None = None,
    step_metric: str | None = None,
    summary: str | None = None,
    goal: str | None = None,
    hidden: bool | None = None,
) -> None:
    """``run.define_metric()`` on the current run of this process (checked, then ignored
    with a warning before ``init()``, as ``log()`` is)."""
    run = current
    if run is None:
        from ..metric_defs import check_name, check_reduce

        check_name(name)
        if reduce is not None:
            check_reduce(reduce)
        return _no_run("define_metric")
    run.define_metric(name, reduce=reduce, step_metric=step_metric, summary=summary,
                      goal=goal, hidden=hidden)  # fmt: skip


def finish(exit_code: int = 0) -> None:
    """``run.finish()`` on the current run of this process."""
    global current
    run = current
    if run is None:
        return
    run.finish(exit_code)
    current = None


def _no_run(what: str) -> None:
    global _warned_no_run
    if not _warned_no_run:
        _warned_no_run = True
        if forked_child:
            _log.warn(
                f"rankwise.{what}() in a forked child (a DataLoader worker, say) is ignored: "
                "the parent process records. Call rankwise.init() in the child to record "
                "from it."
            )
            return
        _log.warn(f"rankwise.{what}() before rankwise.init(): ignored. Call rankwise.init() first.")
