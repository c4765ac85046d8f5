"""What ran: recorded once per run at ``init()``, off the training thread.

``attach(run)`` starts one daemon thread on the run's primary (its git state, program and
packages: a ``Provenance`` record of scope ``run``) and on each node's local rank 0 (the
node's host, OS, Python, torch, CUDA, NCCL and driver versions and GPU models: scope
``node``). ``init()`` never waits for it. Everything it runs is bounded: each ``git`` call
has a timeout (its process group is killed past it, so a hung ``git`` or a credential
helper it started cannot hold a pipe open), and the whole capture stops at
``Settings.provenance_timeout``; what was not captured by then is left out with a
``note``. The thread is a run component: the run's end waits for it at most until that
same deadline, so a short program still records what ran. Any error is a warning, never
an exception in training.

Switches (each a setting, and so ``RANKWISE_<NAME>``): ``git`` (commit, branch, remote,
dirty flag), ``save_code`` (the diff of tracked files, ``git diff HEAD``, as a blob cut at
``MAX_DIFF`` bytes), ``packages`` (the installed distributions, read with
``importlib.metadata``: no subprocess). A remote URL keeps no credentials
(``https://user:token@host/x`` -> ``https://host/x``); environment variables are recorded
only by name prefix (``ENV_PREFIXES``) and never one whose name looks secret
(``SECRET_NAME``); a command-line value after a secret-looking flag is masked.
"""

from __future__ import annotations

import os
import platform
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from .. import _log
from ..stream import records as R

if TYPE_CHECKING:
    from .handle import RunHandle
    from .run import Run

MAX_DIFF = 1024 * 1024  # bytes of ``git diff HEAD`` kept; more is cut, with a note
GIT_CALL_TIMEOUT = 5.0  # at most this per git call (s), within the capture's deadline
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.I
)
ENV_PREFIXES = (
    "CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "OMP_", "MASTER_", "SLURM_JOB", "LOCAL_WORLD",
)  # fmt: skip
MASK = "***"


def attach(run: Run) -> None:
    """Start recording what ran for ``run`` (the primary and each node's local rank 0)."""
    try:
        handle = run.handle()
        if handle is None:
            return
        primary = bool(run.is_primary)
        node = handle.local_rank == 0
        if not (primary or node):
            return
        _preload()
        capture = Capture(handle, primary=primary, node=node)
        handle.add_component(capture)
        capture.start()
    except Exception as exc:  # tracking problems never stop training
        _log.warn(f"what ran is not recorded: {exc!r}")


def _preload() -> None:
    """Import what the capture thread needs on the calling thread (``gpu.preload_nvml``:
    a forked child must never inherit a module import a thread of ours was in)."""
    from importlib import metadata  # noqa: F401

    from ..stream import blobs  # noqa: F401
    from . import gpu

    gpu.preload_nvml()


class Capture:
    """The thread that records what ran (a run component: see the module docstring)."""

    def __init__(self, handle: RunHandle, *, primary: bool, node: bool) -> None:
        self.handle = handle
        self.primary = primary
        self.node = node
        self.settings = handle.settings
        self.deadline = time.monotonic() + float(self.settings.provenance_timeout)
        self._thread = threading.Thread(target=self._run, name="rankwise-provenance", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, deadline: float) -> None:
        self._thread.join(max(0.0, min(deadline, self.deadline) - time.monotonic()))

    def _run(self) -> None:
        try:
            if self.node:
                info = node_info(self.handle.settings)
                self.handle.put_control(lambda seq, t: R.Provenance(seq, t, "node", info))
            if self.primary:
                self._run_scope()
        except Exception as exc:  # tracking problems never stop training
            _log.warn(f"what ran is only partly recorded: {exc!r}")

    def _run_scope(self) -> None:
        # git stops a little before the deadline the run's end waits until, so what
        # was captured by then is still written.
        timeout = float(self.settings.provenance_timeout)
        info, diff = run_info(self.settings, self.deadline - min(1.0, timeout / 4))
        digest, size = None, 0
        if diff is not None:
            from ..stream.blobs import write_blob

            digest, size = write_blob(self.handle.dir, diff)
            git = info.get("git")
            if isinstance(git, dict):
                git["diff_digest"], git["diff_size"] = digest, size
        self.handle.put_control(lambda seq, t: R.Provenance(seq, t, "run", info, digest, size))


def run_info(settings: Any, deadline: float) -> tuple[dict[str, Any], bytes | None]:
    """The primary's part: program, command line, git state, packages; and the diff."""
    info: dict[str, Any] = {
        "program": program_path(),
        "argv": mask_argv([str(a) for a in sys.argv]),
        "cwd": os.getcwd(),
    }
    notes: list[str] = []
    diff: bytes | None = None
    if settings.packages:  # first: a hung git must not cost the packages their turn
        info["packages"] = packages()
    if settings.git:
        git, diff, note = git_info(deadline, with_diff=bool(settings.save_code))
        if git:
            info["git"] = git
        if note:
            notes.append(note)
    if notes:
        info["note"] = "; ".join(notes)
    return info, diff


def program_path() -> str | None:
    """The script that runs: ``__main__``'s file, else ``sys.argv[0]`` when it names a
    file (a process whose ``__main__`` is not a script, e.g. a worker of a pool); None
    for ``python -c`` and the interactive prompt."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if isinstance(path, str) and path:
        return os.path.abspath(path)
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    return None


_SECRET_FLAG = re.compile(r"^--?[\w.-]*(" + SECRET_NAME.pattern + r")[\w.-]*$", re.I)


def mask_argv(argv: list[str]) -> list[str]:
    """``argv`` with the value of a secret-looking flag masked (``--api-key X``,
    ``--token=X``)."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        flag, eq, _value = arg.partition("=")
        if _SECRET_FLAG.match(flag):
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(arg)
                mask_next = True
            continue
        out.append(arg)
    return out


def strip_credentials(url: str) -> str:
    """A remote URL without user and password (``https://u:t@host/x`` -> ``https://host/x``);
    an scp-like ``git@host:x`` keeps its user (no secret in it)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


class TimedOut(Exception):
    pass


def run_bounded(args: list[str], cwd: str, deadline: float) -> bytes | None:
    """``args``' stdout, or None when it failed; raises ``TimedOut`` past the call's
    bound (``GIT_CALL_TIMEOUT`` or the deadline), after killing its process group."""
    left = min(GIT_CALL_TIMEOUT, deadline - time.monotonic())
    if left <= 0:
        raise TimedOut
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    try:
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, _ = proc.communicate(timeout=left)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.communicate()
        raise TimedOut from None
    return out if proc.returncode == 0 else None


def git_info(
    deadline: float, with_diff: bool, cwd: str | None = None
) -> tuple[dict[str, Any] | None, bytes | None, str | None]:
    """(git fields, the diff, a note) for the repository holding ``cwd``."""
    cwd = cwd or os.getcwd()
    git: dict[str, Any] = {}
    diff: bytes | None = None

    def text(*args: str) -> str | None:
        out = run_bounded(["git", *args], cwd, deadline)
        return out.decode("utf-8", "replace").strip() if out is not None else None

    try:
        root = text("rev-parse", "--show-toplevel")
        if root is None:
            return None, None, None  # not in a git repository, or no git
        git["root"] = root
        commit = text("rev-parse", "--verify", "-q", "HEAD")
        if commit:
            git["commit"] = commit
        branch = text("rev-parse", "--abbrev-ref", "HEAD")
        if branch and branch != "HEAD":
            git["branch"] = branch
        remote = text("config", "--get", "remote.origin.url")
        if remote:
            git["remote"] = strip_credentials(remote)
        status = text("status", "--porcelain", "--untracked-files=no")
        if status is not None:
            git["dirty"] = bool(status)
        if with_diff and commit and status:
            raw = run_bounded(["git", "diff", "HEAD", "--no-color", "--no-ext-diff"], cwd, deadline)
            if raw:
                if len(raw) > MAX_DIFF:
                    raw = raw[:MAX_DIFF]
                    git["diff_truncated"] = True
                diff = raw
    except TimedOut:
        return git or None, diff, "git timed out: the git state is incomplete"
    return git, diff, None


def packages() -> dict[str, str]:
    """The installed distributions (``pip freeze``'s names and versions)."""
    from importlib import metadata

    out: dict[str, str] = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            continue
        if name:
            out[str(name)] = str(dist.version)
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def recorded_env(environ: Any = None) -> dict[str, str]:
    """The environment variables worth keeping (``ENV_PREFIXES``), never a secret-looking
    one (``SECRET_NAME``)."""
    environ = os.environ if environ is None else environ
    return {
        k: str(v)
        for k, v in sorted(environ.items())
        if k.startswith(ENV_PREFIXES) and not SECRET_NAME.search(k)
    }


def node_info(settings: Any) -> dict[str, Any]:
    """This node's host, OS, versions and GPU models."""
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "env": recorded_env(),
    }
    torch = sys.modules.get("torch")  # never imported here: the program's, if it uses it
    if torch is not None:
        info["torch"] = str(getattr(torch, "__version__", ""))
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        if cuda:
            info["cuda"] = str(cuda)
        try:
            nccl = torch.cuda.nccl.version() if cuda else None
            if nccl:
                info["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        except Exception:
            pass
    info.update(_nvml())
    return info


def _nvml() -> dict[str, Any]:
    """Driver version and GPU models through NVML, when there is one."""
    try:
        import pynvml  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except Exception:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:
        return {}
    out: dict[str, Any] = {}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        out["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            gpus.append(name.decode() if isinstance(name, bytes) else str(name))
        out["gpus"] = gpus
    except Exception:
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out
