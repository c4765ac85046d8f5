"""The client side's retry vocabulary: what a failed request means, and how long to wait.

Every client of a rankwise server (the stream uploader, blob sends, orphan adoption,
``rankwise sync``, the artifact client) classifies a failure the same way:

* ``Retry``: transient (unreachable, slow, busy); try again after ``backoff_delay``,
  which takes the server's ``Retry-After`` advice (``retry_after``) as a floor.
* ``GiveUp``: sending the same request again cannot succeed.
* ``Refused``: a ``GiveUp`` for refused credentials (401) or scope (403).

``transient(response)`` raises the ``Retry`` a status calls for, so the statuses that
mean "later" are listed once. No httpx import at module level: ``import rankwise``
pulls in no network library.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

# Statuses that mean "try again later"; 429 and 503 may carry a Retry-After.
BUSY = (429, 503)
LATER = (408, 425)


class Retry(Exception):
    """Transient: the server is unreachable, slow, or busy. Try again later.

    ``after``: the seconds the server advised (``Retry-After`` of a 429 or 503), if any.
    """

    def __init__(self, message: str, after: float | None = None) -> None:
        super().__init__(message)
        self.after = after


class GiveUp(Exception):
    """Sending these bytes again cannot succeed; the stream stays local for ``rankwise sync``."""


class Refused(GiveUp):
    """The server refused the credentials (401) or their scope (403)."""


class RunDeleted(GiveUp):
    """The server answered 410 Gone: the run was deleted (in its trash, or purged)."""


def refusal(server: str, project: str, status: int, message: str) -> str:
    """What a 401/403 means to a rank, short and naming the one fix: an ingest token.
    (The server's own 401 text is for people with a browser: it suggests a read token.)"""
    why = "no valid token" if status == 401 else message
    return (
        f"the server at {server} refused the upload ({why}): set RANKWISE_TOKEN to an ingest "
        f"token (rankwise token create --db URL --role ingest --project {project})"
    )


def backoff_delay(
    failures: int, cap: float, base: float = 0.25, advised: float | None = None
) -> float:
    """Capped exponential backoff with jitter: spreads the retries of many ranks apart.

    A server's advice (``Retry-After``) is a floor: the wait is 1 to 1.5 times it, so
    ranks told the same time do not all come back at once; never more than ``cap``."""
    if advised is not None:
        return min(cap, advised * random.uniform(1.0, 1.5))
    exp = min(cap, base * 2.0 ** min(failures - 1, 30))
    return exp * random.uniform(0.5, 1.0)


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date); None if
    absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def transient(response: httpx.Response, message: str) -> None:
    """Raise ``Retry`` when ``response``'s status means "later" (429/503 with the
    server's ``Retry-After``, 408, 425, any other 5xx); return otherwise."""
    status = response.status_code
    if status in BUSY:
        after = retry_after(response.headers.get("retry-after"))
        raise Retry(f"server answered {status}: {message}", after)
    if status in LATER or status >= 500:
        raise Retry(f"server answered {status}: {message}")


def unreachable(exc: Exception) -> Retry:
    """The ``Retry`` for a transport failure (refused connection, timeout, reset)."""
    return Retry(f"{type(exc).__name__}: {exc}")
