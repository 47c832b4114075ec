"""Option parsing shared by the CLI's commands."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer


def policy_names(text: str | None, default: list[str] | None = None) -> list[str]:
    """A comma-separated list of policy names — placements (``best-fit``) or
    ``<ordering>+<placement>`` (``drf+fgd``) — checked against the registries;
    ``default`` (every placement when ``None``) when ``text`` is empty."""
    import inference  # noqa: F401  (registers "learned")
    from scheduling.policies import available_policies
    from scheduling.policies.registry import UnknownPolicyError, get_policy

    names = [p.strip() for p in (text or "").split(",") if p.strip()]
    if not names and text:  # ",,": every policy, the learned ones included, was not what was asked
        raise typer.BadParameter(f"names no policy: {text!r}")
    if not names:
        return list(default) if default is not None else available_policies()
    for name in names:
        try:
            get_policy(name)
        except (UnknownPolicyError, ValueError) as e:  # unknown, or its settings malformed (SEMSCHED_LOOKAHEAD_*)
            raise typer.BadParameter(str(e)) from None
    return names


def check_new_version(out: Path, version: str | None, option: str = "--version", *, publishes: bool = True) -> None:
    """Refuse, before any training, a ``version`` name that would overwrite a model or escape
    ``out``: an existing ``out/version`` (the serving one too), ``latest`` (the serving link),
    a path. ``None`` or empty: the command picks a fresh name. ``publishes``: the command may point
    ``out/latest`` at the new version, so a ``latest`` that is not a symlink is refused too (it could
    not be repointed: found by review, an OSError after the whole training)."""
    if Path(out).exists() and not Path(out).is_dir():  # (found by review: the trained model was lost at the save)
        raise typer.BadParameter(f"{out} is a file: give the directory the versions go to", param_hint="--out")
    if publishes:
        from inference.model.io import check_latest

        try:
            check_latest(out)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--out") from None
    if not version:
        return
    if version in ("latest", ".", "..") or version.startswith(".") or "/" in version or "\\" in version:
        raise typer.BadParameter(f"{version!r} is not a version name (a plain directory name; not latest, "
                                 "which points at the serving version)", param_hint=option)  # fmt: skip
    if (Path(out) / version).exists():
        raise typer.BadParameter(f"{Path(out) / version} already exists: a version is never overwritten "
                                 "(pick another name)", param_hint=option)  # fmt: skip


def seed_list(text: str) -> list[int]:
    """Seeds: a range ``a-b`` or a comma-separated list."""
    try:
        if "-" in text:
            a, b = (int(x) for x in text.split("-", 1))
            seeds = list(range(a, b + 1))
        else:
            seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"seeds must be 'a-b' or a comma-separated list, not {text!r}") from None
    if not seeds:
        raise typer.BadParameter(f"no seeds in {text!r} (a range 'a-b' needs a <= b)")
    if len(set(seeds)) < len(seeds):  # (found by review: a seed named twice weighed twice in a score, once in a test)
        raise typer.BadParameter(f"seed {next(s for s in seeds if seeds.count(s) > 1)} is named twice in {text!r}")
    return seeds


def positive(value: float | None) -> float | None:
    """A typer callback: the option, when given, must be a finite number > 0 (inf let a simulator step
    of inf through: every job vanished, exit 0)."""
    if value is not None and not 0 < value < math.inf:
        raise typer.BadParameter(f"must be a finite number > 0, not {value:g}")
    return value


def non_negative(value: float | None) -> float | None:
    """A typer callback: the option, when given, must be a finite number >= 0."""
    if value is not None and not 0 <= value < math.inf:
        raise typer.BadParameter(f"must be a finite number >= 0, not {value:g}")
    return value


def result_file(path: Path) -> Path:
    """A typer callback: a JSON result file, checked before the benchmark runs (a directory failed
    the write at the end, the results lost)."""
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a directory: give the result file's path (like {path / 'result.json'})")
    if path.parent.exists() and not path.parent.is_dir():
        raise typer.BadParameter(f"{path.parent} is not a directory")
    return path


def report_dir(path: Path) -> Path:
    """A typer callback: a report directory, checked before the benchmark runs (an existing file
    failed the write at the end, the timings lost)."""
    if path.exists() and not path.is_dir():
        raise typer.BadParameter(f"{path} is a file: give a directory for the report")
    return path


def encoder_names(text: str) -> str:
    """A typer callback: every comma-separated name names a text encoder
    (:func:`inference.encoders.encoder_problem`)."""
    from inference.encoders import encoder_problem

    for name in (n.strip() for n in text.split(",")):
        problem = encoder_problem(name) if name else None
        if problem is not None:
            raise typer.BadParameter(problem)
    return text


_AGE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_time(text: str, now: datetime | None = None, option: str = "--since") -> datetime:
    """A window's start: an age before ``now`` (``90m``, ``36h``, ``7d``, ``2w``) or a time (ISO 8601:
    ``2026-12-01``, ``2026-12-01T08:00:00Z``; without a zone, UTC). Refused: anything else, a time
    still to come."""
    now = now or datetime.now(UTC)
    if age := _AGE.fullmatch(text):
        epoch = datetime(1970, 1, 1, tzinfo=UTC)  # older than any archive: an age past it is the whole archive
        try:
            return max(epoch, now - timedelta(seconds=float(age[1]) * _UNIT_S[age[2]]))
        except (OverflowError, ValueError):  # (found by review: 1000000d was a traceback)
            return epoch
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(f"{option} takes an age (90m, 36h, 7d, 2w) or a time (2026-12-01, "
                                 f"2026-12-01T08:00:00Z), not {text!r}") from None  # fmt: skip
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if when > now:
        raise typer.BadParameter(f"{option} {text} is still to come (now is {now:%Y-%m-%dT%H:%M:%SZ})")
    return when
