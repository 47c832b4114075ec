"""Where the shared workflows live: ``<data dir>/workflows`` (``$SEMSCHED_DATA_DIR`` or
``<repo>/../shared/data``)."""

from __future__ import annotations

from pathlib import Path

from ops.traces.paths import data_dir


def workflows_dir() -> Path:
    return data_dir() / "workflows"


def topcuoglu_dir() -> Path:
    return workflows_dir() / "heft-topcuoglu-2002"


def wfinstances_dir() -> Path:
    return workflows_dir() / "wfinstances"


def wfinstance_files(directory: Path | None = None) -> list[Path]:
    """The WfInstances JSON files, sorted by name."""
    return sorted((directory or wfinstances_dir()).glob("*.json"))


def missing_workflows() -> str | None:
    """Why the shared workflows cannot be read (a benchmark asked for them), or None: a run must not
    quietly leave their sections out (set ``$SEMSCHED_DATA_DIR``, or ``--no-workflows``)."""
    if not topcuoglu_dir().is_dir():
        return f"no Topcuoglu graph in {topcuoglu_dir()}"
    if not wfinstance_files():
        return f"no WfInstances workflows (*.json) in {wfinstances_dir()}"
    return None
