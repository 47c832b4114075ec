"""The models' Python-backend stub processes under a tritonserver, watched by ``semsched serve``.

Each model runs in its own stub, a child of tritonserver (:mod:`inference.serving.server`). A stub
that dies (a crash in the model's code, the OOM killer, a CUDA abort) is not started again: that
model then fails every request after ~1 s while tritonserver, and its readiness endpoint, stay up, so a
supervisor (the compose file's ``restart``) never steps in and the workers fall back for good (found by
review). ``semsched serve`` looks at its stubs every few seconds and exits 1, naming the model, when
one is gone. Linux only (``/proc``); elsewhere nothing is watched.
"""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, parent pid)`` of a process (None: gone)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
    return fields[0], int(fields[1])


def model_stubs(triton_pid: int) -> dict[int, str]:
    """The stubs of ``triton_pid``'s models: ``{pid: model name}`` (from each stub's ``<model>/<n>/model.py``)."""
    if not PROC.is_dir():
        return {}
    out = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or (stat := _stat(int(entry.name))) is None or stat[1] != triton_pid:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"triton_python_backend_stub"):
            script = next((a for a in argv[1:] if a.endswith(b"model.py")), None)
            out[int(entry.name)] = Path(script.decode(errors="replace")).parent.parent.name if script else "?"
    return out


def dead(stubs: dict[int, str]) -> list[tuple[int, str]]:
    """The ``(pid, model)`` of ``stubs`` no longer running (gone, or a zombie)."""
    return [(pid, model) for pid, model in stubs.items() if (stat := _stat(pid)) is None or stat[0] in ("Z", "X")]
