"""Versioned schema migrations: ``storage/migrations/NNNN_name.sql``.

Each file is one version; its statements (split on ``;`` at the end of a line) run in
order, and each is recorded in ``schema_migrations`` (version, statement number, checksum)
right after it succeeds. A re-run skips recorded statements, so ``migrate`` is idempotent
and a migration interrupted half-way resumes at the statement that failed instead of
repeating the ones before it. Editing an already-applied statement is refused
(:class:`MigrationError`): write a new version instead.

A process that dies between a statement and its record runs the statement again, so every
statement must be safe to repeat (``IF [NOT] EXISTS``). One was not (0007 dropped and added a
constraint: run again after the drop, it failed for ever); it was rewritten, and
:data:`REWRITTEN` keeps the checksums archives recorded for it before as the same statement.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from storage.client import ArchiveClient

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations
(
    version    UInt32,
    name       String,
    statement  UInt16,
    checksum   FixedString(40),
    applied_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(applied_at)
ORDER BY (version, statement)
"""


#: (version, statement) -> the checksum of an earlier text of the statement, the same change
#: written so that it can be repeated
REWRITTEN: dict[tuple[int, int], str] = {
    (7, 0): "69888b07e0ccbe6c0862d26bc7984dea01b34513",  # DROP CONSTRAINT outcome_known
    (7, 1): "21e3bc6aeea53385272be5f304fa6c75e14baf00",  # ADD CONSTRAINT outcome_known
}


class MigrationError(RuntimeError):
    """A migration file is malformed, or an applied statement was edited afterwards."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]

    def checksum(self, i: int) -> str:
        return hashlib.sha1(self.statements[i].encode()).hexdigest()


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def split_statements(sql: str) -> list[str]:
    """Statements of one file: ``;`` at a line end separates them; ``--`` comment lines drop."""
    parts = re.split(r";\s*$", _strip_comments(sql), flags=re.MULTILINE)
    return [p.strip() for p in parts if p.strip()]


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Every migration under ``directory``, by version; duplicate versions are an error."""
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise MigrationError(f"bad migration file name {path.name!r} (want NNNN_name.sql)")
        version = int(m.group(1))
        if version in found:
            raise MigrationError(f"two migrations with version {version:04d}")
        statements = tuple(split_statements(path.read_text()))
        if not statements:
            raise MigrationError(f"{path.name} has no statements")
        found[version] = Migration(version, m.group(2), statements)
    return [found[v] for v in sorted(found)]


def applied(client: ArchiveClient) -> dict[tuple[int, int], str]:
    """``(version, statement) -> checksum`` of what is recorded as applied."""
    client.command(BOOTSTRAP)
    _, rows = client.query_rows("SELECT version, statement, checksum FROM schema_migrations FINAL")
    return {(int(v), int(s)): str(c) for v, s, c in rows}


def behind(client: ArchiveClient, directory: Path = MIGRATIONS_DIR) -> bool:
    """Whether a statement of a migration is not recorded as applied, found with a ``SELECT`` alone:
    a reader whose account may not write (``readonly=1``) opens an up-to-date archive without
    :func:`migrate`, whose bootstrap is a ``CREATE``. True when ``schema_migrations`` cannot be read."""
    try:
        return bool(missing(client, directory))
    except Exception:  # noqa: BLE001 - no such table (a new archive): migrate says what is wrong, if anything
        return True


def missing(client: ArchiveClient, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """The migrations of which a statement is not recorded as applied (a ``SELECT``; raises what the
    client raises, e.g. when ``schema_migrations`` does not exist)."""
    _, rows = client.query_rows("SELECT version, statement FROM schema_migrations FINAL")
    done = {(int(v), int(i)) for v, i in rows}
    return [m.version for m in load_migrations(directory) if any((m.version, i) not in done
                                                                 for i in range(len(m.statements)))]  # fmt: skip


def migrate(client: ArchiveClient, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Apply what is missing; returns the versions of which at least one statement ran."""
    done = applied(client)
    ran: list[int] = []
    for mig in load_migrations(directory):
        for i, stmt in enumerate(mig.statements):
            key = (mig.version, i)
            checksum = mig.checksum(i)
            if key in done:
                if done[key] not in (checksum, REWRITTEN.get(key)):
                    raise MigrationError(
                        f"migration {mig.version:04d}_{mig.name} statement {i} changed after it "
                        "was applied; add a new migration instead of editing an applied one"
                    )
                continue
            client.command(stmt)
            client.insert_arrow(
                "schema_migrations",
                pa.table({
                    "version": pa.array([mig.version], pa.uint32()),
                    "name": [mig.name],
                    "statement": pa.array([i], pa.uint16()),
                    "checksum": [checksum],
                    "applied_at": pa.array([datetime.now(UTC)], pa.timestamp("ms", tz="UTC")),
                }),
            )  # fmt: skip
            if not ran or ran[-1] != mig.version:
                ran.append(mig.version)
    return ran
