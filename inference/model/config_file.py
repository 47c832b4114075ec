"""A model directory's ``config.json``, read on its own: promotion's checks read it before they load any
weights, and :func:`inference.model.io.load_model` through it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_config(directory: Path) -> dict[str, Any]:
    """A model directory's ``config.json``, a JSON object; ``ValueError`` naming the file and why when it is
    not one (found by review: a config that was a list, not UTF-8 or cut off gave an AttributeError,
    a TypeError or a UnicodeDecodeError that named no file); ``FileNotFoundError`` when it is missing."""
    path = Path(directory) / "config.json"
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: missing") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not JSON ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a JSON object (a {type(meta).__name__})")
    return meta
