"""The ``policy`` call's tensors through system shared memory, when the worker and Triton share a host.

A step's request is ~0.43 MB at 256 pending x 1,213 nodes and its answer's scores ~0.2 MB; in the
gRPC message they are copied into and out of protobuf on both sides (Triton adds ~1–2 ms more
to a step that way at 64–256 pending: ``semsched bench triton``, with and without
``SEMSCHED_TRITON_SHARED_MEMORY=off``). Triton's shared-memory extension lets the client put the input tensors in a POSIX
shared-memory region it registered with the server, and have the server write an output there:
the gRPC message then carries only the tensors' names, shapes and offsets.

- **One region per client**, inputs first, the output after them (64-byte aligned): a file under
  ``/dev/shm`` created ``0600`` with a unique name, mapped here, registered with the server (which
  maps it too), then unlinked at once — a worker that dies leaves no file behind (the server
  drops its mapping when the region is unregistered, or when it stops).
- **Grown, not reused after doubt.** A step larger than the region gets a new, larger region. A
  call that failed or missed its deadline *retires* the region (the server may still read or
  write it): the next call registers a fresh one, and the old one is unregistered as soon as
  the server lets go of it (it refuses while a request still uses the region).
- **Only for a worker of the server's user on its host.** Registering a region makes the server
  map any shared-memory object it can open (a crafted registration of its own Python-backend
  regions crashes it), so the extension stays behind a token: ``semsched serve`` writes it to
  :func:`~inference.serving.host_files.token_path` (``/tmp/semsched-triton-<grpc port>.token``, mode 0600, removed at exit)
  and the client sends it with its registrations. A worker that cannot read it (another user,
  host or container) sends the tensors in the message.
- **The wire is always the fallback**: when the lane is off (``SEMSCHED_TRITON_SHARED_MEMORY=off``,
  no ``/dev/shm``, or the server refused a registration), has no token, or is busy with another
  call, the tensors travel in the message, as before.
- **Regions of dead workers** (``semsched-<pid>-...`` whose process is gone) are unregistered by
  the next worker's first registration, so a crash-looping worker does not pile them up in the
  server; the names one left in ``/dev/shm`` (dead before the server mapped them) go then too.

Only the policy call uses it (the encoder's and predictor's payloads are small). Tensors of
``object`` dtype (Triton ``BYTES``) always travel in the message.
"""

from __future__ import annotations

import mmap
import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inference.serving.host_files import SHM_DIR, pid_alive, token_headers

SHM_ENV = "SEMSCHED_TRITON_SHARED_MEMORY"  # auto (default) | off
ALIGN = 64
MIN_REGION = 1 << 20  # 1 MiB; grown by doubling
_OURS = re.compile(r"^semsched-(\d+)-[0-9a-f]+$")


def remove_dead_files(shm: Path | None = None) -> list[Path]:
    """Remove the ``/dev/shm`` names of regions whose worker died before the server mapped them (a
    registered region's name goes at once: :meth:`SharedMemoryLane.registered`); what was removed."""
    folder = SHM_DIR if shm is None else shm
    removed = []
    for name in dead_regions(p.name for p in folder.glob("semsched-*")) if folder.is_dir() else []:
        try:  # (another user's, in the sticky /dev/shm: not ours to remove, and no reason to fail)
            (folder / name).unlink(missing_ok=True)
        except OSError:
            continue
        removed.append(folder / name)
    return removed


def dead_regions(names: Iterable[str]) -> list[str]:
    """The semsched regions among ``names`` whose worker process is gone (on this host)."""
    dead = []
    for name in names:
        m = _OURS.match(name)
        if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
            dead.append(name)
    return dead


def lane_setting() -> str:
    """``auto`` or ``off`` from ``SEMSCHED_TRITON_SHARED_MEMORY``; ``ValueError`` names anything else."""
    raw = (os.environ.get(SHM_ENV) or "auto").strip().lower()
    if raw not in ("auto", "off"):
        raise ValueError(f"{SHM_ENV} must be auto or off, not {raw!r}")
    return raw


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class Region:
    """A POSIX shared-memory region of ``size`` bytes, mapped here (``/dev/shm/<name>``, mode 0600)."""

    def __init__(self, size: int, owner: int | None = None) -> None:
        self.size = size
        self.name = f"semsched-{owner or os.getpid()}-{secrets.token_hex(6)}"  # (the owner's PID: dead_regions)
        self.path = SHM_DIR / self.name
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, size)
            self._map: mmap.mmap | None = mmap.mmap(fd, size)
        except BaseException:
            self.unlink()
            raise
        finally:
            os.close(fd)

    @property
    def key(self) -> str:
        """The ``shm_open`` key the server maps it by."""
        return f"/{self.name}"

    def write(self, offset: int, array: np.ndarray) -> None:
        if self._map is None:
            raise ValueError(f"shared memory region {self.name} is closed")
        data = np.ascontiguousarray(array)
        view = np.frombuffer(self._map, np.uint8, count=data.nbytes, offset=offset)
        view[:] = data.reshape(-1).view(np.uint8)
        del view

    def read(self, offset: int, dtype: Any, shape: Iterable[int]) -> np.ndarray:
        """A copy of the ``dtype`` array of ``shape`` at ``offset``."""
        if self._map is None:  # (the client closed while the call was in flight)
            raise ValueError(f"shared memory region {self.name} is closed")
        shape = tuple(int(s) for s in shape)
        count = int(np.prod(shape))
        if offset + count * np.dtype(dtype).itemsize > self.size:
            raise ValueError(f"{count} x {np.dtype(dtype)} at {offset} does not fit a region of {self.size} bytes")
        return np.frombuffer(self._map, dtype, count=count, offset=offset).reshape(shape).copy()

    def unlink(self) -> None:
        """Remove the name (both mappings stay valid)."""
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        self.unlink()
        if self._map is not None:
            self._map.close()
            self._map = None


@dataclass
class Call:
    """One call's use of the region: ``inputs`` (name -> (offset, nbytes)) and ``output`` (name,
    offset, nbytes), the dtypes and shapes of the tensors in it."""

    region: Region
    inputs: dict[str, tuple[int, np.ndarray]] = field(default_factory=dict)
    output: tuple[str, int, int] | None = None

    def infer_inputs(self) -> list[Any]:
        """tritonclient inputs for the tensors in the region, by reference (offset and size)."""
        from tritonclient.grpc import InferInput
        from tritonclient.utils import np_to_triton_dtype

        out = []
        for name, (offset, value) in self.inputs.items():
            x = InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype))
            x.set_shared_memory(self.region.name, value.nbytes, offset)
            out.append(x)
        return out

    def requested_outputs(self, names: Iterable[str]) -> list[Any]:
        """Every output the model has (a request that names some gets only those); the lane's in the region."""
        from tritonclient.grpc import InferRequestedOutput

        out = []
        for name in names:
            o = InferRequestedOutput(name)
            if self.output is not None and name == self.output[0]:
                o.set_shared_memory(self.region.name, self.output[2], self.output[1])
            out.append(o)
        return out

    def read_output(self, result: Any, dtype: Any) -> np.ndarray:
        """The region's output of ``result`` (its shape from the answer), batch row 0."""
        assert self.output is not None
        name, offset, nbytes = self.output
        shape = list(result.get_output(name).shape)
        if int(np.prod(shape)) * np.dtype(dtype).itemsize > nbytes:
            raise ValueError(f"{name} of shape {shape} is larger than its {nbytes} bytes of shared memory")
        return self.region.read(offset, dtype, shape)[0]


class SharedMemoryLane:
    """The client's region and its registration with one server (module docstring). Not thread-safe
    on its own: a call that finds the lane busy goes by the wire."""

    def __init__(self, setting: str | None = None, url: str = "") -> None:
        setting = lane_setting() if setting is None else setting
        self.off: str | None = None if setting == "auto" else f"{SHM_ENV}=off"
        if self.off is None and not SHM_DIR.is_dir():
            self.off = f"no {SHM_DIR} on this host"
        if self.off is None:  # what dead workers' unregistered regions left in /dev/shm (found by review)
            remove_dead_files()
        self.url = url
        self.token: str | None = None  # read again for each new region (a restarted server has a new one)
        self.swept = False  # dead workers' regions unregistered (once)
        self.region: Region | None = None
        self.outputs: list[str] = []  # the policy model's output names (from the server's metadata)
        self.pending: list[str] = []  # retired regions' names the server may still have registered
        self.busy = False

    def plan(self, arrays: dict[str, np.ndarray], output: tuple[str, int] | None) -> tuple[dict, dict, int]:
        """``(in the region {name: (offset, array)}, in the message {name: array}, bytes needed)``."""
        placed: dict[str, tuple[int, np.ndarray]] = {}
        message: dict[str, np.ndarray] = {}
        end = 0
        for name, value in arrays.items():
            if value.dtype == np.object_:
                message[name] = value
            else:
                placed[name] = (end, value)
                end += _aligned(value.nbytes)
        return placed, message, end + (_aligned(output[1]) if output else 0)

    def needs_region(self, size: int) -> bool:
        return self.region is None or self.region.size < size or not self.outputs

    def headers(self) -> dict[str, str] | None:
        return token_headers(self.token) if self.token else None

    def new_region(self, size: int) -> Region:
        """A fresh region of at least ``size`` bytes (the current one retired); register it next."""
        self.retire()
        grown = MIN_REGION
        while grown < size:
            grown *= 2
        self.region = Region(grown)
        return self.region

    def registered(self) -> None:
        """The server mapped the region: its name can go (module docstring)."""
        assert self.region is not None
        self.region.unlink()

    def refused(self, reason: str) -> None:
        """The server would not map a region: the lane is off for good, with ``reason``."""
        self.off = reason
        self.drop_region()

    def drop_region(self) -> None:
        """The current region, never registered: closed."""
        if self.region is not None:
            self.region.close()
            self.region = None

    def retire(self) -> None:
        """The current region is not used again: closed here (the server keeps its own mapping while
        a timed-out request may still use it), its name ``pending`` until the server unregisters it
        (Triton refuses while a request uses it: the flow tries again at the next call)."""
        if self.region is not None:
            self.region.close()
            self.pending.append(self.region.name)
            self.region = None

    def call(self, placed: dict[str, tuple[int, np.ndarray]], output: tuple[str, int] | None, end: int) -> Call:
        """Write ``placed`` into the region; the output goes after them."""
        assert self.region is not None
        for offset, value in placed.values():
            self.region.write(offset, value)
        out = None
        if output is not None and output[0] in self.outputs:  # (a name the model has: else by the wire)
            out = (output[0], end - _aligned(output[1]), output[1])
        return Call(self.region, dict(placed), out)
