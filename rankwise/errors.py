"""Every exception rankwise raises, in one tree. Messages name the fix.

::

    RankwiseError
    ├── UsageError            (also a ValueError) bad arguments to init() and friends
    │   ├── ConfigError       (also a TypeError) init(config=) that is not a mapping
    │   ├── ArgumentTypeError (also a TypeError) an argument of the wrong type: run.watch()
    │   │                     given no torch module, an integration given an unknown keyword
    │   ├── BadNameError      an id, key or file name that breaks rankwise.names' rules
    │   ├── MediaError        rankwise.Image/Table/Histogram/... given data it cannot record
    │   ├── ArtifactNotFoundError  (also a KeyError) no such artifact, version, alias or
    │                              file in a version
    │   └── ReportNotFoundError  (also a KeyError) no report of that name, or no such
    │                            version of it
    ├── RunNotFoundError      (also a KeyError) Api.run() with an unknown id
    ├── KeyNotLoggedError     (also a KeyError) run.table()/histograms() of a key, step or
    │                         stream the run did not log
    ├── RunExistsError        init(resume="never") for a run that already has data
    ├── SchemaTooNewError     a database migrated by a newer rankwise than this one
    ├── ServerError           Api(server=): the server answered an error or is unreachable
    ├── SyncError             rankwise sync: the server stayed unreachable for retry_for
    ├── ArtifactError         a logged artifact was not stored (Artifact.wait), or a
    │                         file read back does not match its digest
    └── DeliveryError         an alert could not be sent (webhook, SMTP); says why

Problems with *logged data* never raise: they are warned about once and skipped, so a
tracking problem cannot stop training. In remote mode the uploader never raises either:
what it cannot send stays in the stream file for ``rankwise sync``.
"""

from __future__ import annotations


class RankwiseError(Exception):
    """Base of every rankwise exception."""


class UsageError(RankwiseError, ValueError):
    """An argument or environment variable has a value rankwise cannot use."""


class ConfigError(UsageError, TypeError):
    """``config=`` is not a mapping, argparse.Namespace or dataclass. (A *value* that is
    not JSON-like is stored as its string form with a warning, never raised.)"""


class ArgumentTypeError(UsageError, TypeError):
    """An argument has a type rankwise cannot use (``run.watch()`` given something that is
    not a ``torch.nn.Module``, an integration given a keyword ``rankwise.init()`` does not
    take). A ``TypeError`` as well, as Python raises for a wrong argument."""


class BadNameError(UsageError):
    """A name (project, run id, key, file name) breaks its rule in ``rankwise.names``."""

    def __init__(self, what: str, rule: str, shown: str | None = None) -> None:
        self.what = what
        self.rule = rule
        where = f"{what} {shown}" if shown is not None else what
        super().__init__(f"{where} cannot be used: {rule}")


class MediaError(UsageError):
    """A rich value (``rankwise.Image``, ``Table``, ``Histogram``, ``Audio``, ``Video``,
    ``Text``, ``Html``) was given data it cannot record; the message names the fix.

    Raised by the constructors only. Inside ``run.log()`` nothing raises: a value that
    cannot be encoded is skipped with one warning, and the rest of the call is kept."""


class RunNotFoundError(RankwiseError, KeyError):
    """No run with that id (in that project) exists in the data directory."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class KeyNotLoggedError(RankwiseError, KeyError):
    """``run.table()`` or ``run.histograms()`` asked for a key, step or stream the run did
    not log; ``run.media_keys()`` lists what it did. A ``KeyError`` as well."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class RunExistsError(RankwiseError):
    """``resume="never"`` was asked for a run id that already has data."""


class SchemaTooNewError(RankwiseError):
    """The database was migrated by a newer rankwise than this one: upgrade rankwise."""


class ServerError(RankwiseError):
    """The server answered with an error, or could not be reached."""


class SyncError(RankwiseError):
    """The server could not be reached for long enough that ``rankwise sync`` gave up."""


class ArtifactNotFoundError(UsageError, KeyError):
    """No artifact of that name in the project, no such version or alias of it, or no
    such file in a version (``Artifact.get_entry``)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ArtifactError(RankwiseError):
    """A logged artifact could not be stored (``Artifact.wait()`` raises it, naming why),
    or a file read back does not match its digest (a damaged or altered store)."""


class DeliveryError(RankwiseError):
    """An alert was not delivered: the receiver is unreachable, refused, or its address
    is not allowed (SSRF); the message names the host, never a secret."""


class ReportNotFoundError(UsageError, KeyError):
    """No report of that name in the project, or no such version of it."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""
