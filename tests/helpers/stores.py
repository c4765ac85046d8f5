"""Opening the store under test, racing ingesters over it, and a private PostgreSQL.

``kind`` is the store tests' fixture parameter: ``sqlite`` (a file under ``tmp_path``)
or ``postgres`` (the ``pg_dsn`` fixture's own schema, so two stores opened in one test
share one database, as two server processes would). ``private_postgres`` is a cluster
of one test's own, for tests that stop or restart PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rankwise.store.sql import SQLStore

from .env import free_port, in_ci


def open_sql_store(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, **kw: Any
) -> SQLStore:
    """A store of ``kind`` on the test's database (not migrated); ``kw`` go to the store."""
    if kind == "sqlite":
        from rankwise.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / "store.db", **kw)
    from rankwise.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_dsn"), **kw)


def race(work: Callable[[SQLStore, int], None], stores: Sequence[SQLStore]) -> None:
    """Run ``work(store, n)`` for each ``stores[n]`` at once, one thread each; fail with
    every exception a thread raised (a thread's failure would otherwise go unseen)."""
    errors: list[BaseException] = []

    def one(st: SQLStore, n: int) -> None:
        try:
            work(st, n)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(st, n)) for n, st in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def fill_up(path: Path) -> None:
    """Write zeros into ``path`` until its filesystem has not a byte left (a disk full)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 4096, 64):  # every free byte, down to the last few
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


class PrivatePostgres:
    """A throwaway PostgreSQL cluster of this test's own, which it may stop and restart.

    The shared server (``RANKWISE_TEST_POSTGRES``) serves other tests at the same time, so
    a test that takes PostgreSQL down takes down this one instead: ``initdb`` into a fresh
    directory, a free loopback port, trust authentication, unix socket in that directory.
    As root (CI) the cluster runs as the ``postgres`` user (``initdb`` refuses root), via
    ``runuser``; the directory is made under the system temporary directory, since
    pytest's own (``/tmp/pytest-of-root``) is closed to other users.
    """

    def __init__(self, bindir: Path, user: str | None) -> None:
        import tempfile

        self.bindir, self.user = bindir, user
        self.root = Path(tempfile.mkdtemp(prefix="rankwise-pg-"))
        self.data = self.root / "data"
        self.logfile = self.root / "postgres.log"
        self.port = free_port()
        if user is not None:
            import pwd

            entry = pwd.getpwnam(user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/rankwise"
        self._pg(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip
        self.start()
        self._pg("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "rankwise")

    def _pg(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / tool), *args]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.root)
        if check and done.returncode != 0:
            log = self.logfile.read_text()[-2000:] if self.logfile.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stdout}{done.stderr}\n{log}")
        return done

    def start(self) -> None:
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root}"
            " -c fsync=off -c full_page_writes=off -c shared_buffers=32MB -c max_connections=60"
        )
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-o", opts, "-w",
                 "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """``fast``: every session is ended at once (in-flight transactions roll back), as
        ``pg_ctlcluster ... restart`` does; ``immediate``: no shutdown at all (a crash;
        the next start runs recovery)."""
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def close(self) -> None:
        import shutil

        if (self.data / "postmaster.pid").exists():
            self._pg("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def _postgres_bindir() -> Path | None:
    import glob
    import shutil

    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    dirs = glob.glob("/usr/lib/postgresql/*/bin")
    dirs.sort(key=lambda d: int(Path(d).parent.name) if Path(d).parent.name.isdigit() else 0)
    return Path(dirs[-1]) if dirs and (Path(dirs[-1]) / "initdb").exists() else None


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster for this test alone (see ``PrivatePostgres``): skips without
    PostgreSQL's server binaries, but fails under CI, where they must be there."""
    bindir = _postgres_bindir()
    user: str | None = None
    if os.geteuid() == 0:
        import pwd

        try:
            user = pwd.getpwnam("postgres").pw_name
        except KeyError:
            user = None
    problem = None
    if bindir is None:
        problem = "PostgreSQL's server binaries (initdb, pg_ctl) are not installed"
    elif os.geteuid() == 0 and user is None:
        problem = "running as root without a 'postgres' user to run a cluster as"
    if problem is not None:
        if in_ci():
            pytest.fail(f"CI is set but {problem}: these tests must run")
        pytest.skip(problem)
    assert bindir is not None
    cluster = PrivatePostgres(bindir, user)
    try:
        yield cluster
    finally:
        cluster.close()
