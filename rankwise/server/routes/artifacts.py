"""The artifact endpoints: commit and use versions, list them, serve their files.

* ``POST /artifacts/{project}/{name}/versions`` (ingest): a ``CommitRequest``. Every chunk
  its manifest names must be in the blob store first (``POST /blobs/{project}/missing``,
  ``PUT /blobs/{project}/{digest}``), else 409 with ``missing`` (nothing created). 201
  with the new version; 200 with the existing one when the content equals the latest's
  or the ``client_id`` was committed before. A bad name, path or manifest: 422 naming it.
* ``POST /artifacts/{project}/{name}/use`` (ingest): lineage; the version with its manifest.
* ``GET /artifacts/{project}`` (read): the names (``?type=``).
* ``GET /artifacts/{project}/{name}`` (read): its versions, newest first.
* ``GET /artifacts/{project}/{name}/{ref}`` (read): one version, manifest and ``used_by``.
* ``GET /artifacts/{project}/{name}/{ref}/files/{path}`` (read or ingest): the file's
  bytes, its chunks read from the blob store one after the other, always as an
  ``application/octet-stream`` attachment (``nosniff``, a sandbox CSP from the hardening
  middleware): never rendered, whatever the name says. A reference entry is 404: the
  server never fetches, parses or unpickles anything.
* ``GET /runs/{project}/{run}/artifacts`` (read): what a run logged and used.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any
from urllib.parse import quote

import msgspec
from fastapi import APIRouter, Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from ...artifacts.manifest import Chunk, Entry, check_alias, is_version
from ...budget import BudgetError
from ...errors import UsageError
from ...names import FILE_MAX, ID_MAX, ID_PATTERN, ID_RULE, check_id, is_file_name, is_id
from ...store.artifact_reads import LATEST
from ...store.artifacts import ArtifactConflict, check_commit
from ...store.blobs import BlobStore, iter_chunks
from ...wire.artifacts import (
    ArtifactsReply,
    CommitRequest,
    RunArtifacts,
    UseRequest,
    VersionInfo,
    VersionsReply,
)
from ..encoding import ApiError, reply
from .blobs import OCTET
from .deps import answers, blob_store, ref, store

ingest_router = APIRouter(tags=["artifacts"])
read_router = APIRouter(tags=["artifacts"])
files_router = APIRouter(tags=["artifacts"])

# The path parameter is ``artifact``, not ``name``: the hardening middleware documents a
# ``name`` parameter with the key rule (a saved view's name), while every path segment
# follows the id rule.
# Patterns are documented only (pydantic's regex engine has no look-ahead): the hardening
# middleware enforces the id rule on every segment and the file rule on a file's path.
_ID_DOC = {"pattern": ID_PATTERN, "maxLength": ID_MAX}
Name = Annotated[str, Path(description="the artifact's name", json_schema_extra=_ID_DOC)]
Ref = Annotated[
    str, Path(description="latest, a version (v3) or an alias", json_schema_extra=_ID_DOC)
]
_FILE_CHAR = r"/\\:#%;\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff"
_SEGMENT = f"(?!\\.\\.?(?:/|$))[^ {_FILE_CHAR}](?:[^{_FILE_CHAR}]*[^ {_FILE_CHAR}])?"
# The file-name rule as near as a regex gets (NFC and Unicode categories are checked in code).
FILE_PATTERN = f"^{_SEGMENT}(?:/{_SEGMENT})*$"
FilePath = Annotated[
    str,
    Path(
        description="the file's path in the manifest, each segment percent-encoded",
        json_schema_extra={"pattern": FILE_PATTERN, "maxLength": FILE_MAX},
    ),
]
_ASCII = re.compile(r"[^A-Za-z0-9._-]")


def _body(struct: type) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ref(struct.__name__)}},
        }
    }


def _decode(raw: bytes, struct: type[Any]) -> Any:
    try:
        return msgspec.json.decode(raw, type=struct)
    except msgspec.ValidationError as exc:
        raise ApiError(422, f"body: {exc}") from None
    except (msgspec.DecodeError, RecursionError):  # RecursionError: nested too deep
        raise ApiError(422, f"body must be a JSON {struct.__name__}") from None


def _checked_commit(raw: bytes, name: str) -> CommitRequest:
    req: CommitRequest = _decode(raw, CommitRequest)
    try:
        check_commit(name, req)
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None
    except BudgetError as exc:
        raise ApiError(exc.status, str(exc)) from None
    return req


def _no_version(project: str, name: str, ref: str) -> ApiError:
    return ApiError(404, f"no version {ref!r} of artifact {name!r} in project {project!r}")


def _check_ref(ref: str) -> str:
    if ref != LATEST and not is_version(ref):
        try:
            check_alias(ref)
        except UsageError as exc:
            raise ApiError(422, str(exc)) from None
    return ref


def _check_protected_aliases(request: Request, req: CommitRequest) -> None:
    who = getattr(request.state, "principal", None)
    if who is None or who.role != "ingest":
        return
    protected = set(request.app.state.settings.protected_aliases)
    if any(alias in protected for alias in req.aliases):
        raise ApiError(
            403,
            "an ingest token cannot set a protected alias ("
            + ", ".join(sorted(protected))
            + "): commit it with an admin token",
        )


def _check_chunks(
    blobs: BlobStore, project: str, req: CommitRequest
) -> tuple[list[str], str | None]:
    """The chunks the blob store lacks, and the first file whose manifest gives a chunk
    another size than the stored blob's (a download would then send a ``Content-Length``
    its bytes do not match)."""
    digests = req.manifest.chunk_digests()
    if len(digests) <= 4:
        found = [blobs.size(project, d) for d in digests]
    else:  # one stat (a HEAD on object storage) per digest: overlap them
        with ThreadPoolExecutor(8) as pool:
            found = list(pool.map(lambda d: blobs.size(project, d), digests))
    sizes = dict(zip(digests, found))
    missing = [d for d, size in sizes.items() if size is None]
    if missing:
        return missing, None
    for e in req.manifest.entries:
        if any(sizes[c.digest] != c.size for c in e.chunks):
            return [], e.path
    return [], None


_COMMIT_REPLIES = answers(
    VersionInfo,
    403,
    409,
    413,
    422,
    503,
    e403="an ingest token naming a protected alias (ServerSettings.protected_aliases)",
    e413="metadata or file paths over the server's budget (the message says which)",
    e409="chunks the server lacks (error.missing lists them: PUT them, commit again), "
    "or another type for this name",
    e422="a bad name, alias, file path or manifest (the message names it); nothing stored",
    e503="this server keeps no blobs",
)
_COMMIT_REPLIES[201] = {**_COMMIT_REPLIES[200], "description": "created (200: an existing one)"}


@ingest_router.post(
    "/artifacts/{project}/{artifact}/versions",
    response_model=None,
    status_code=201,
    responses=_COMMIT_REPLIES,
    openapi_extra=_body(CommitRequest),
)
async def commit(request: Request, project: str, artifact: Name) -> Response:
    """Store a version whose chunks are uploaded: 201 new, 200 the same as an existing one."""
    name = artifact
    # Decoding and checking a manifest of up to --max-body-mb is CPU work: off the event
    # loop, so one commit never holds up the other requests.
    req = await run_in_threadpool(_checked_commit, await request.body(), name)
    _check_protected_aliases(request, req)
    blobs = blob_store(request)
    missing, wrong = await run_in_threadpool(_check_chunks, blobs, project, req)
    if missing:
        raise ApiError(
            409,
            f"{len(missing)} chunk(s) of this artifact are not on the server: PUT each to "
            f"/api/v1/blobs/{project}/<digest>, then commit again",
            missing=missing,
        )
    if wrong is not None:
        raise ApiError(
            422,
            f"artifact file {wrong!r}: a chunk's size is not the size of the stored blob "
            "of its digest",
        )
    try:
        info, created = await run_in_threadpool(store(request).commit_artifact, project, name, req)
    except ArtifactConflict as exc:
        raise ApiError(409, str(exc)) from None
    info.manifest = None
    info.used_by = []
    return reply(request, info, 201 if created else 200)


@ingest_router.post(
    "/artifacts/{project}/{artifact}/use",
    response_model=None,
    responses=answers(VersionInfo, 404, 422, e404="no such artifact version"),
    openapi_extra=_body(UseRequest),
)
async def use(request: Request, project: str, artifact: Name) -> Response:
    """Record that a run used a version; the version with its manifest."""
    name = artifact
    body: UseRequest = _decode(await request.body(), UseRequest)
    try:
        check_id(body.run_id, "run id")
        if body.label is not None:
            check_id(body.label, "stream label")
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None
    _check_ref(body.ref)
    found = await run_in_threadpool(
        store(request).use_artifact, project, name, body.ref, body.run_id, body.label
    )
    if found is None:
        raise _no_version(project, name, body.ref)
    return reply(request, found)


@read_router.get(
    "/artifacts/{project}",
    response_model=None,
    responses=answers(ArtifactsReply, 422),
)
def names(
    request: Request,
    project: str,
    type: Annotated[
        str | None,
        Query(description="only names of this type", json_schema_extra=_ID_DOC),
    ] = None,
) -> Response:
    """The project's artifact names: type, version count, latest, size, last change."""
    if type is not None and not is_id(type):
        raise ApiError(422, "query parameter 'type' is not a valid name: " + ID_RULE)
    return reply(request, ArtifactsReply(artifacts=store(request).artifact_names(project, type)))


@read_router.get(
    "/artifacts/{project}/{artifact}",
    response_model=None,
    responses=answers(VersionsReply, 404, 422, e404="no artifact of that name"),
)
def versions(request: Request, project: str, artifact: Name) -> Response:
    """Every version of an artifact (no manifests), newest first."""
    name = artifact
    found = store(request).artifact_versions(project, name)
    if found is None:
        raise ApiError(404, f"no artifact {name!r} in project {project!r}")
    return reply(request, VersionsReply(versions=found))


@read_router.get(
    "/artifacts/{project}/{artifact}/{ref}",
    response_model=None,
    responses=answers(VersionInfo, 404, 422, e404="no such artifact version"),
)
def version(request: Request, project: str, artifact: Name, ref: Ref) -> Response:
    """One version (``latest``, ``v3``, an alias) with its manifest and lineage."""
    name = artifact
    found = store(request).artifact_version(project, name, _check_ref(ref))
    if found is None:
        raise _no_version(project, name, ref)
    return reply(request, found)


@read_router.get(
    "/runs/{project}/{run}/artifacts",
    response_model=None,
    responses=answers(RunArtifacts, 422),
)
def run_artifacts(request: Request, project: str, run: str) -> Response:
    """The versions a run logged and those it used (empty for a run with none)."""
    return reply(request, store(request).run_artifacts(project, run))


def content_disposition(path: str) -> str:
    """``attachment`` with the file's last name, RFC 6266/5987 (``filename*`` for any
    character, an ASCII ``filename`` fallback)."""
    base = path.rsplit("/", 1)[-1]
    fallback = _ASCII.sub("_", base)[:128] or "file"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(base, safe='')}"


def _chunks(blobs: BlobStore, project: str, entry: Entry) -> Iterator[bytes]:
    for c in entry.chunks:
        f = blobs.open(project, c.digest)
        if f is None:  # checked before the reply started; gone since: cut the body short
            raise RuntimeError(f"chunk {c.digest} of {entry.path!r} vanished")
        yield from iter_chunks(f)


def _check_not_media(request: Request, project: str, entry: Entry) -> None:
    """403 for an ingest token when a chunk of ``entry`` is a blob a run record of the
    project names (an image, a table...): committing a manifest that names a digest must
    not turn an ingest token into a reader of the project's media. A read token may."""
    who = getattr(request.state, "principal", None)
    if who is None or who.role != "ingest":
        return
    kind_of = getattr(store(request), "blob_kind", None)
    if kind_of is None:
        return
    digests = dict.fromkeys([entry.digest, *(c.digest for c in entry.chunks)])
    if any(kind_of(project, d) is not None for d in digests if d):
        raise ApiError(
            403,
            "this file's bytes are also media a run of the project logged: an ingest token "
            "cannot download them, use a read token",
        )


@files_router.get(
    "/artifacts/{project}/{artifact}/{ref}/files/{path:path}",
    response_model=None,
    responses={
        200: {
            "description": "the file's bytes, always an attachment",
            "content": {OCTET: {"schema": {"type": "string", "format": "binary"}}},
        },
        **answers(
            None,
            403,
            404,
            422,
            e403="an ingest token, for bytes that are also media a run of the project logged",
            e404="no such version or file, or a reference entry",
        ),
    },
)
def file(request: Request, project: str, artifact: Name, ref: Ref, path: FilePath) -> Response:
    """One file of a version, streamed (its chunks in order), as an attachment."""
    name = artifact
    if not is_file_name(path):
        raise ApiError(422, "the file path is not a valid artifact file name")
    entry = store(request).artifact_entry(project, name, _check_ref(ref), path)
    if entry is None:
        raise ApiError(404, f"no file {path!r} in version {ref!r} of artifact {name!r}")
    if entry.ref is not None:
        raise ApiError(404, f"{path!r} is a reference: the server holds no bytes for it")
    blobs = blob_store(request)
    _check_not_media(request, project, entry)
    whole = None
    if blobs.missing(project, [c.digest for c in entry.chunks]):
        # rankwise ui serves a local store's files whole, by the file's own digest.
        whole = Entry(path=entry.path, digest=entry.digest, size=entry.size)
        whole.chunks = [Chunk(entry.digest, entry.size)]
        if len(entry.chunks) < 2 or blobs.size(project, entry.digest) != entry.size:
            raise ApiError(404, f"the bytes of {path!r} are missing from this server's blob store")
    headers = {
        "Content-Disposition": content_disposition(path),
        "Content-Length": str(entry.size),
        "ETag": f'"{entry.digest}"',
        "Cache-Control": "private, max-age=31536000, immutable",
        "X-Content-Type-Options": "nosniff",
    }
    body = _chunks(blobs, project, whole or entry)
    return StreamingResponse(body, media_type=OCTET, headers=headers)


__all__ = ["files_router", "ingest_router", "read_router"]
