"""Trace loaders by name: ``get_loader("openb")``, ``available_traces()``."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

from ops.traces.base import TraceLoader
from ops.traces.dlrm2025 import DlrmLoader
from ops.traces.google2011 import Google2011Loader
from ops.traces.jsonl import JsonlLoader
from ops.traces.openb import OpenbLoader

LOADERS: dict[str, type[TraceLoader]] = {
    cls.name: cls for cls in (OpenbLoader, DlrmLoader, Google2011Loader, JsonlLoader)
}


@dataclass(frozen=True)
class TraceInfo:
    name: str
    summary: str
    default_path: Path | None  # None: a path is required (jsonl)


def available_traces() -> list[TraceInfo]:
    """Every registered trace, with its default file under the shared data directory."""
    out = []
    for name, cls in LOADERS.items():
        try:
            path: Path | None = cls.default_path()
        except ValueError:
            path = None
        out.append(TraceInfo(name=name, summary=cls.summary, default_path=path))
    return out


def get_loader(name: str, path: str | Path | None = None, **opts: object) -> TraceLoader:
    """A loader for trace ``name`` on ``path`` (default: the shared copy). ``opts`` are the
    common selection options (``strict``, ``limit``, ``start_offset``, ``end_offset``,
    ``min_duration_s``, ``max_duration_s``, ``sample``, ``seed``) and the loader's own."""
    try:
        cls = LOADERS[name]
    except KeyError:
        raise ValueError(f"unknown trace {name!r}; available: {', '.join(LOADERS)}") from None
    own = loader_options(cls)
    unknown = sorted(k for k in opts if k not in own and k not in COMMON_OPTIONS)
    if unknown:  # (a TypeError about __init__'s keyword arguments before)
        raise ValueError(f"the {name} loader has no option {', '.join(map(repr, unknown))}; its own: "
                         f"{', '.join(own) or 'none'}")  # fmt: skip
    return cls(path, **opts)


def _keyword_options(cls: type) -> list[str]:
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]


#: the selection options every loader takes (``ops.traces.base.TraceLoader``'s)
COMMON_OPTIONS = frozenset(_keyword_options(TraceLoader))


def loader_options(cls: type[TraceLoader]) -> list[str]:
    """The keyword options a loader class takes beyond the common ones."""
    return [n for n in _keyword_options(cls) if n not in COMMON_OPTIONS]
