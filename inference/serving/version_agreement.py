"""One server's models swap to a new version together, or none of them does.

Inside tritonserver each model (``policy``, ``job_encoder``, ``predictor``) runs in a Python-backend
stub of its own, with a :class:`~inference.serving.host.ModelHost` of its own that watches
``models/latest``. Each used to decide alone whether a new version could serve: the policy model
refuses a version whose outputs differ from those Triton was configured with, the job encoder one
whose encoder does not build. Found by review: the policy then kept answering v1 while the job
encoder answered v2 with another text encoder, and every worker step that had a new job text fell
back to its heuristic until ``semsched serve`` was restarted.

Now each host, having loaded a version and built its parts (its guards passed, its listeners ran),
writes its verdict beside the others' — ``<root>/<version key>/<model>``: ``ready``, or ``refused``
with the reason — and swaps only once every model of the server is ready. One refusal refuses the
version for all of them (with the refusing model named). The root is the server's workspace
(``semsched serve`` makes a new one each start): a verdict holds for that server only. The swaps
still land up to one watch interval apart; the worker refuses an answer from another version than
its step's inputs were built for, so that interval costs at most a step's fallback.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

READY = "ready"
REFUSED = "refused"
WAITING = "waiting"


class VersionAgreement:
    """``kind``'s verdicts on the versions it loads, and the verdict of all ``kinds`` together."""

    def __init__(self, root: Path, kind: str, kinds: Sequence[str]) -> None:
        if kind not in kinds:
            raise ValueError(f"{kind!r} is not one of the models that agree ({', '.join(kinds)})")
        self.root, self.kind, self.kinds = Path(root), kind, tuple(kinds)

    @staticmethod
    def key(mark: tuple[Path, int]) -> str:
        """A version's directory name for its mark (:func:`inference.model.io.version_mark`): the same in
        every stub's process (``hash()`` of a path is not: salted per process)."""
        path, changed = mark
        digest = hashlib.sha256(f"{Path(path).resolve()}|{changed}".encode()).hexdigest()[:16]
        return f"{Path(path).name}-{digest}"

    def say(self, mark: tuple[Path, int], verdict: str, reason: str = "") -> None:
        """Record this model's verdict on the version of ``mark`` (written whole: a reader never sees half)."""
        if verdict not in (READY, REFUSED):
            raise ValueError(f"a verdict is {READY} or {REFUSED}, not {verdict!r}")
        where = self.root / self.key(mark)
        where.mkdir(parents=True, exist_ok=True)
        tmp = where / f".{self.kind}.{os.getpid()}.tmp"
        tmp.write_text(f"{verdict}\n{reason}")
        os.replace(tmp, where / self.kind)

    def withdraw(self, mark: tuple[Path, int]) -> None:
        """Take back this model's verdict on the version of ``mark`` (it let the version go: latest moved on
        before every model was ready), so that no other model swaps to it on that verdict."""
        (self.root / self.key(mark) / self.kind).unlink(missing_ok=True)

    def verdict(self, mark: tuple[Path, int]) -> tuple[str, str]:
        """``(READY, "")`` once every model is ready; ``(REFUSED, "<model>: <reason>")`` once any refused;
        else ``(WAITING, the models not heard from yet)``."""
        where = self.root / self.key(mark)
        missing = []
        for kind in self.kinds:
            try:
                verdict, _, reason = (where / kind).read_text().partition("\n")
            except FileNotFoundError:
                missing.append(kind)
                continue
            if verdict == REFUSED:
                return REFUSED, f"the {kind} model refused it: {reason}"
        return (WAITING, ", ".join(missing)) if missing else (READY, "")
