"""Trace loaders by name: ``get_loader("openb")``, ``available_traces()``."""

from __future__ import annotations

import inspect
import types
import typing
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
    hints = {**typing.get_type_hints(TraceLoader.__init__), **typing.get_type_hints(cls.__init__)}
    for key, value in opts.items():  # (found by review: limit=1.5 or cluster=5 went in, to fail far away)
        if key in hints and not _fits_type(value, hints[key]):
            raise ValueError(f"option {key}={value!r}: expected {_describe(hints[key])}")
    return cls(path, **opts)


def _fits_type(value: object, hint: object) -> bool:
    """Whether an option's value (read from JSON on the command line) is of its annotated type; a type
    this does not know (a loader's own class) is left to the loader."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits_type(value, h) for h in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is Path:
        return isinstance(value, str | Path)
    return True


def _describe(hint: object) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(h) for h in typing.get_args(hint))
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    if hint is type(None):
        return "null"
    return {bool: "true or false", int: "a whole number", float: "a number", str: "a string",
            Path: "a path"}.get(hint, getattr(hint, "__name__", str(hint)))  # type: ignore[call-overload]


def _keyword_options(cls: type) -> list[str]:
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]


#: the selection options every loader takes (``ops.traces.base.TraceLoader``'s)
COMMON_OPTIONS = frozenset(_keyword_options(TraceLoader))


def loader_options(cls: type[TraceLoader]) -> list[str]:
    """The keyword options a loader class takes beyond the common ones."""
    return [n for n in _keyword_options(cls) if n not in COMMON_OPTIONS]
