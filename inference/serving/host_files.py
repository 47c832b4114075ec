"""The files a Triton server and its workers share on one host, and sweeping what dead ones left.

- **The token file** (:func:`token_path`, ``/tmp/semsched-triton-<grpc port>.token``, mode 0600):
  ``semsched serve`` writes the random token that opens tritonserver's shared-memory extension,
  and its own PID on a second line; a worker of the same user on the same host reads the token
  (:mod:`inference.serving.shared_memory` says why the extension needs one).
- **What a server leaves while it runs**, named after the ``semsched serve`` process's PID
  (:func:`serve_prefix`, ``semsched-triton-<pid>-``): its workspace (the model repository and
  the Python backend, ``/tmp/semsched-triton-<pid>-…/``) and the Python-backend stubs' own
  shared-memory regions (``/dev/shm/semsched-triton-<pid>-…``, 1 MiB each, one per model).

A server that stops removes all of these. A ``semsched serve`` killed with SIGKILL cannot
(tritonserver and its stubs die with it: PR_SET_PDEATHSIG), and before this sweep every such kill
left a workspace, a token file and 3 MiB of ``/dev/shm`` behind for good. Now the next
``semsched serve`` on the host removes those of processes that are gone
(:func:`sweep_dead_servers`), and a server whose tritonserver died removes its stubs' regions
itself. Only this user's files are touched, and only when their PID names no live process.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path

SHM_DIR = Path("/dev/shm")
TOKEN_KEY = "semsched-shm-token"  # tritonserver's restricted-protocol key for the shared-memory extension
SERVE_PREFIX = "semsched-triton-"
_SERVED = re.compile(r"^semsched-triton-(\d+)-")  # (not a token file: semsched-triton-<port>.token)


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def serve_prefix(pid: int | None = None) -> str:
    """The name prefix of what the ``semsched serve`` process ``pid`` (default: this one) leaves while it runs."""
    return f"{SERVE_PREFIX}{pid or os.getpid()}-"


def token_path(grpc_port: int) -> Path:
    """Where ``semsched serve`` on ``grpc_port`` keeps the shared-memory token."""
    return Path(tempfile.gettempdir()) / f"{SERVE_PREFIX}{grpc_port}.token"


def write_token(grpc_port: int) -> str | None:
    """A fresh token in :func:`token_path` (0600, replacing a dead server's), this process's PID on
    the second line; None when the file cannot be ours: another user's in the sticky /tmp, or a
    running server's (a second server on its port, which will not bind, must not take it)."""
    path = token_path(grpc_port)
    token = secrets.token_urlsafe(24)
    owner = _token_owner(path)
    if owner is not None and owner != os.getpid() and pid_alive(owner):
        return None
    try:
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    with os.fdopen(fd, "w") as f:
        f.write(f"{token}\n{os.getpid()}\n")
    return token


def _token_lines(path: Path) -> list[str]:
    return path.read_text().split("\n")


def _token_owner(path: Path) -> int | None:
    """The PID on a token file's second line (None: no file, or none written there)."""
    try:
        lines = _token_lines(path)
    except OSError:
        return None
    return int(lines[1]) if len(lines) > 1 and lines[1].strip().isdigit() else None


def remove_token(grpc_port: int, token: str) -> None:
    """Remove :func:`token_path` if it still holds ``token`` (not a later server's)."""
    path = token_path(grpc_port)
    try:
        if _token_lines(path)[0] == token:
            path.unlink()
    except OSError:
        pass


def read_token(url: str) -> str | None:
    """The token of the server at ``url`` (``host:port``) if this host has one this user wrote."""
    try:
        path = token_path(int(url.rsplit(":", 1)[1]))
        info = path.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        return _token_lines(path)[0].strip() or None
    except (OSError, ValueError, IndexError):
        return None


def token_headers(token: str) -> dict[str, str]:
    """The gRPC headers that carry ``token`` to the shared-memory extension."""
    return {f"triton-grpc-protocol-{TOKEN_KEY}": token}


def _dead_owner(path: Path) -> bool:
    """``path`` is this user's and names (in its name or, for a token file, its second line) a PID
    that is not running; never this process."""
    try:
        if path.lstat().st_uid != os.getuid():
            return False
        if path.name.endswith(".token"):
            pid = _token_owner(path)
        else:
            m = _SERVED.match(path.name)
            pid = int(m.group(1)) if m else None
    except (OSError, ValueError):
        return False
    return pid is not None and pid != os.getpid() and not pid_alive(pid)


def sweep_dead_servers(tmp: Path | None = None, shm: Path = SHM_DIR) -> list[Path]:
    """Remove the workspaces, token files (in ``tmp``, default the temp dir) and stub regions (in
    ``shm``) of ``semsched serve`` processes that are gone (module docstring); what was removed."""
    removed = []
    for folder in (Path(tmp or tempfile.gettempdir()), shm):
        if not folder.is_dir():
            continue
        for path in folder.glob(SERVE_PREFIX + "*"):
            if not _dead_owner(path):
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def remove_own_regions(shm: Path = SHM_DIR) -> list[Path]:
    """Remove the stub regions named after this process (:func:`serve_prefix`): what the stubs of a
    tritonserver that died (or was killed) could not remove themselves."""
    removed = []
    for path in shm.glob(serve_prefix() + "*") if shm.is_dir() else ():
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed
