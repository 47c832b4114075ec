"""Where the shared traces live: ``$SEMSCHED_DATA_DIR`` or ``<repo>/../shared/data``."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The shared data directory (read at call time, so tests may set the variable)."""
    env = os.environ.get("SEMSCHED_DATA_DIR")
    return Path(env) if env else (REPO_ROOT.parent / "shared" / "data").resolve()


def traces_dir() -> Path:
    return data_dir() / "traces"
