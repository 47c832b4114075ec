"""Resolve the Kafka broker's class path from Maven Central into a cached lib directory.

There is no Kafka distribution to download: ``mvn dependency:copy-dependencies`` against
``ops/kafka/pom.xml`` copies the broker's jars into a lib dir (by default
``~/.cache/semsched/kafka-<version>/lib``). A marker file records the pom digest and the jar
list, so a complete resolution of the current pom is reused across runs and processes.

This is the lowest layer of ``ops.kafka``, so it also defines the package's errors
(:class:`KafkaBrokerError` and its subclass :class:`JarResolutionError`); import them from
:mod:`ops.kafka.broker`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ops.processes import die_with_parent

KAFKA_POM = Path(__file__).with_name("pom.xml")
DEFAULT_KAFKA_VERSION = "4.1.1"
LIB_ENV = "SEMSCHED_KAFKA_LIB"
MARKER_NAME = ".semsched-kafka-lib.json"


class KafkaBrokerError(RuntimeError):
    """The local broker could not be started, reached or stopped."""


class JarResolutionError(KafkaBrokerError):
    """``mvn dependency:copy-dependencies`` failed; carries the command and its output tail."""

    def __init__(self, message: str, command: list[str], stderr_tail: str) -> None:
        super().__init__(message)
        self.command = command
        self.stderr_tail = stderr_tail


def output_tail(text: str, lines: int = 40) -> str:
    """The last ``lines`` lines of a command's output (for error messages)."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def kafka_version(pom: Path = KAFKA_POM) -> str:
    """The ``<kafka.version>`` property of the pom (falls back to the version we ship)."""
    try:
        match = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", pom.read_text())
    except OSError:
        match = None
    return match.group(1) if match else DEFAULT_KAFKA_VERSION


def default_lib_dir(pom: Path = KAFKA_POM) -> Path:
    """``$SEMSCHED_KAFKA_LIB`` or ``~/.cache/semsched/kafka-<version>/lib``."""
    env = os.environ.get(LIB_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "semsched" / f"kafka-{kafka_version(pom)}" / "lib"


def _pom_digest(pom: Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def _marker(lib_dir: Path) -> Path:
    return lib_dir / MARKER_NAME


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def jars_ready(lib_dir: Path, pom: Path) -> bool:
    """True when ``lib_dir`` holds a complete resolution of the current ``pom``."""
    try:
        marker = json.loads(_marker(lib_dir).read_text())
        if marker.get("pom_sha256") != _pom_digest(pom):
            return False
        jars = marker.get("jars") or []
    except (OSError, ValueError):
        return False
    if not any(j.startswith("kafka_2.13-") for j in jars):
        return False
    return all((lib_dir / j).is_file() for j in jars)


def mvn_command(pom: Path, output_dir: Path) -> list[str]:
    """The exact Maven command used to resolve the broker class path."""
    return [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={output_dir}",
    ]


def ensure_jars(lib_dir: Path, pom: Path, timeout: float = 900) -> Path:
    """Resolve the Kafka jars into ``lib_dir`` unless already complete; return the dir.

    Raises :class:`JarResolutionError` (quoting the command and its output tail) on failure.
    """
    if jars_ready(lib_dir, pom):
        return lib_dir
    lib_dir.parent.mkdir(parents=True, exist_ok=True)
    with _flock(lib_dir.parent / f".{lib_dir.name}.lock"):
        if jars_ready(lib_dir, pom):  # resolved by a concurrent process while we waited
            return lib_dir
        for left in lib_dir.parent.glob(f".{lib_dir.name}-*"):  # a killed resolution's (the lock: nobody else's)
            shutil.rmtree(left, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{lib_dir.name}-", dir=lib_dir.parent))
        try:
            cmd = mvn_command(pom, tmp)
            try:  # mvn dies with this process (a killed resolution left it running to the end)
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                                      preexec_fn=die_with_parent)  # fmt: skip
            except FileNotFoundError as exc:
                raise JarResolutionError(
                    f"Cannot resolve Kafka jars: `mvn` is not on PATH.\n  command: {shlex.join(cmd)}",
                    cmd,
                    str(exc),
                ) from exc
            except subprocess.TimeoutExpired as exc:
                raw = exc.stderr or exc.stdout or ""
                out = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
                raise JarResolutionError(
                    f"Resolving Kafka jars timed out after {timeout:.0f}s.\n"
                    f"  command: {shlex.join(cmd)}\n{output_tail(out)}",
                    cmd,
                    output_tail(out),
                ) from exc
            jars = sorted(p.name for p in tmp.glob("*.jar"))
            if proc.returncode != 0 or not any(j.startswith("kafka_2.13-") for j in jars):
                # Maven writes [ERROR] lines to stdout; show stderr first, then stdout.
                tail = output_tail(proc.stderr, 30)
                out_tail = output_tail(proc.stdout, 30)
                details = "\n".join(
                    part
                    for part in (
                        f"  stderr (tail):\n{tail}" if tail else "",
                        f"  stdout (tail):\n{out_tail}" if out_tail else "",
                    )
                    if part
                )
                raise JarResolutionError(
                    f"Resolving Kafka jars into {lib_dir} failed (exit {proc.returncode}, "
                    f"{len(jars)} jars).\n"
                    f"  command: {shlex.join(cmd)}\n{details or '  (no output)'}",
                    cmd,
                    tail or out_tail,
                )
            lib_dir.mkdir(parents=True, exist_ok=True)
            for stale in lib_dir.glob("*.jar"):  # e.g. a different slf4j-api version
                stale.unlink()
            for jar in jars:
                os.replace(tmp / jar, lib_dir / jar)
            _marker(lib_dir).write_text(
                json.dumps({"pom_sha256": _pom_digest(pom), "jars": jars, "resolved_at": time.time()})
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return lib_dir
