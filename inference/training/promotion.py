"""Model promotion: a new version serves only if it beats the serving one on the held-out replay.

:func:`promote` (``semsched models promote DIR``):

1. records the candidate in ``model_versions`` with status ``candidate`` (where it came
   from, its config and training metrics);
2. evaluates it and the serving version (what ``<models_root>/latest`` points to) on the
   same :class:`~inference.training.heldout.HeldOutReplay`; a recorded evaluation of the
   serving version on an identical replay is reused instead of re-running it;
3. records the serving version too if it was never recorded (it was promoted before the
   registry existed, or by hand);
4. repoints ``latest`` at the candidate (:func:`inference.model.io.point_latest`) only if the
   rules of :mod:`inference.training.gate` allow it — its primary metric is STRICTLY higher
   (or there is no serving version, "first version", or it does not load) AND its p99
   model-step latency (measured by the same evaluation) is within ``latency_budget_ms`` —
   and records the decision (``promoted`` or ``rejected`` with the reason naming the rule
   that refused, both evaluations, the budget, ``decided_at``): a new revision of the
   candidate's row. The candidate is evaluated where it lies and copied to
   ``<models_root>/<version>`` only when promoted: a refused one leaves the model root as it was.

A version written without promotion (``semsched train --no-promote``) is recorded too, as a
``candidate`` without evaluation (:func:`record_candidate`).

The registry is any :class:`~inference.training.registry.Registry` (``ops`` passes the
archive's ``model_versions`` table: ``ops.model_registry.ArchiveRegistry``).

A candidate that does not load is rejected (its "evaluation" would be the heuristic fallback).
``latest`` is repointed before the decision row is written: if the write fails, the version
serves unrecorded and the next promotion records it as the serving version.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inference.model.config_file import read_config
from inference.training.gate import DEFAULT_LATENCY_BUDGET_MS, decide
from inference.training.heldout import (
    PRIMARY_METRIC,
    HeldOutReplay,
    evaluate_held_out,
    inputs_digest,
    latency_probe,
)
from inference.training.registry import ModelVersion, Registry
from inference.training.step_latency import LatencyProbe
from scheduling.job import JobRequest
from scheduling.node import NodeView


@dataclass
class PromotionResult:
    version: str
    status: str  # promoted | rejected
    reason: str
    serving_version: str | None  # the version compared against (None: there was none)
    candidate: dict[str, Any]  # evaluation
    serving: dict[str, Any] | None
    latest: str | None  # what latest points to afterwards
    row: ModelVersion

    @property
    def promoted(self) -> bool:
        return self.status == "promoted"


def model_meta(directory: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(version, model config, train.json)`` of a model directory (train.json may be absent)."""
    meta = read_config(directory)
    train_path = directory / "train.json"
    train = json.loads(train_path.read_text()) if train_path.exists() else {}
    if "version" not in meta or not isinstance(meta.get("model", {}), dict) or not isinstance(train, dict):
        raise ValueError(f"{directory}: its config.json has no version or no model object, or its train.json "
                         "is not an object")  # fmt: skip
    return str(meta["version"]), dict(meta.get("model", {})), train


def serving_dir(models_root: Path) -> Path | None:
    """The directory ``<models_root>/latest`` points to, or None."""
    link = Path(models_root) / "latest"
    if not link.exists():
        return None
    return link.resolve()


def _source(train: dict[str, Any]) -> str:
    return "archive" if train.get("source") == "archive" else "simulator"


def _row_for(directory: Path, status: str, **kw: Any) -> ModelVersion:
    version, config, train = model_meta(directory)
    return ModelVersion(version=version, source=_source(train), status=status,  # type: ignore[arg-type]
                        expert=str(train.get("expert", "")), path=str(directory.resolve()), config=config,
                        train_metrics=train, primary_metric=PRIMARY_METRIC, **kw)  # fmt: skip


def record_candidate(candidate_dir: Path, registry: Registry, reason: str) -> ModelVersion:
    """Record a version that was written but not evaluated (``semsched train --no-promote``):
    status ``candidate``, no evaluation, ``reason`` saying so; :func:`promote` later records its
    evaluation and the decision as newer revisions of the same row."""
    check_name(Path(candidate_dir), registry)
    return registry.record(_row_for(Path(candidate_dir), "candidate", reason=reason))


def check_name(candidate_dir: Path, registry: Registry) -> None:
    """``FileExistsError`` when ``model_versions`` holds the candidate's version name for another model
    (another ``train.json``): the registry is shared by every host and models root, and a new row would
    replace that model's (found by review: another host's promoted ``v1`` became this host's candidate)."""
    version, _, train = model_meta(Path(candidate_dir))
    row = registry.get(version)
    same = json.dumps(row.train_metrics, sort_keys=True) == json.dumps(train, sort_keys=True) if row else True  # (NaN)
    if row is not None and row.train_metrics and not same:
        raise FileExistsError(f"model_versions holds {version} for another model ({row.status}, {row.path or 'no path'}"
                              f"): version names must be unique across hosts; {candidate_dir} is not recorded "
                              "(train it again with another --version)")  # fmt: skip


def trained_seeds(train: dict[str, Any]) -> set[int]:
    """The fill seeds a version learned from or was selected on, from its ``train.json``: every list
    under a key ending in ``seeds`` (training, validation, DAgger, RL — also those of the version it
    was fine-tuned from, which its ``train.json`` carries) but the ones it names as held out."""
    found: set[int] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and key.endswith("seeds") and "held_out" not in key and isinstance(value, list):
                    found.update(int(v) for v in value if isinstance(v, int) and not isinstance(v, bool))
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(train)
    return found


def check_candidate(candidate_dir: Path, models_root: Path, replay_seeds: Sequence[int] = ()) -> tuple[str, Path]:
    """The candidate's version and where it serves from once promoted (``<models_root>/<version>``),
    checked before anything is evaluated: ``ValueError`` for a directory whose config cannot be
    read, for the serving version itself and for a candidate or a serving version that learned
    from (or was selected on) any of the held-out ``replay_seeds``, ``FileExistsError`` for a version name taken there."""
    from inference.model.io import check_latest

    check_latest(models_root)  # a latest that is no symlink: the promotion could not repoint it (found by review:
    candidate = Path(candidate_dir)  # semsched models promote found out after the whole evaluation)
    try:
        version, _, train = model_meta(candidate)
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{candidate} is not a readable model directory: {type(e).__name__}: {e}") from None
    leak = sorted(trained_seeds(train) & set(replay_seeds))
    if leak:
        raise ValueError(f"{version} was trained or validated on fill seeds {leak} of the held-out replay "
                         f"({candidate / 'train.json'}): evaluate it on seeds it has not seen")  # fmt: skip
    serving = serving_dir(models_root)
    if serving is not None and serving.resolve() == candidate.resolve():
        raise ValueError(f"{version} is already the serving version ({models_root / 'latest'})")
    if serving is not None:  # its score on seeds it learned from would be inflated (found by review)
        try:
            serving_version, _, serving_train = model_meta(serving)
        except (OSError, ValueError, KeyError):
            serving_train = {}
        if leak := sorted(trained_seeds(serving_train) & set(replay_seeds)):
            raise ValueError(f"the serving version {serving_version} was trained or validated on fill seeds {leak} "
                             "of the held-out replay: compare on seeds neither has seen")  # fmt: skip
    target = models_root / version
    if target.exists() and candidate.resolve() != target.resolve():
        raise FileExistsError(f"{target} exists and is not {candidate}: version names must be unique")
    return version, target


def hot_swap_note(candidate: Path, serving: Path | None) -> str:
    """What a running ``semsched serve`` does with the promoted version, when it cannot take it: it
    swaps in a version whose policy outputs are the serving one's, and keeps serving the old one
    until restarted otherwise (Triton's model configuration is bound to the outputs), while
    in-process workers switch at once. Empty when it swaps (or either does not load here)."""
    if serving is None:
        return ""
    from inference.model.io import load_model
    from inference.serving.models import policy_output_ranks

    try:
        new, old = policy_output_ranks(load_model(candidate)), policy_output_ranks(load_model(serving))
    except Exception:  # noqa: BLE001 - (the evaluation said whether it loads)
        return ""
    if new == old:
        return ""
    return (f"; restart semsched serve to serve it through Triton: its policy outputs differ from "
            f"{serving.name}'s ({', '.join(sorted(set(new) ^ set(old)))}), so a running server keeps serving "
            f"{serving.name} (and its workers follow the server), while in-process workers switch now")


@contextlib.contextmanager
def _promotion_lock(models_root: Path) -> Iterator[None]:
    """An exclusive lock on ``<models_root>/.promote.lock`` (released by the kernel if the holder dies)."""
    models_root.mkdir(parents=True, exist_ok=True)
    with open(models_root / ".promote.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _install(candidate_dir: Path, target: Path) -> Path:
    """The promoted candidate as ``target`` (copied there if it lives elsewhere), whole or not at all:
    copied into a temporary sibling and renamed into place, as ``save_model`` writes a version (a copy
    cut short left a half version that every later promotion refused as a name taken)."""
    from inference.model.io import publish_directory

    if candidate_dir.resolve() != target.resolve():
        publish_directory(target, lambda staging: shutil.copytree(candidate_dir, staging, dirs_exist_ok=True))
    return target


def _serving_evaluation(registry: Registry, serving: Path, version: str, replay: HeldOutReplay,
                        nodes: Sequence[NodeView], pods: Sequence[JobRequest], reuse: bool,
                        sim: tuple[Any, Any, Any] | None, probe: LatencyProbe,
                        ) -> tuple[dict[str, Any], ModelVersion | None]:  # fmt: skip
    """The serving version's evaluation (reused when recorded on the same replay) and its row."""
    row = registry.get(version)
    weights = weights_digest(serving)
    if reuse and row is not None:
        own = row.evaluation.get("candidate") or {}
        if (own.get("replay") == replay.key() and own.get("inputs") == inputs_digest(nodes, pods) and own.get("loaded")
                and own.get("weights") == weights):  # fmt: skip  # (the same name in another models root, or a
            return own | {"reused_from_registry": True}, row  # version rewritten by hand, is another model: review)
    return evaluate_held_out(serving, nodes, pods, replay, sim, probe) | {"weights": weights}, row


def weights_digest(directory: Path) -> str:
    """sha256 of a version's weights (``model.pt``; "" when unreadable): what a recorded evaluation was of."""
    try:
        with open(Path(directory) / "model.pt", "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return ""


def _serving_version(serving: Path | None) -> tuple[str | None, bool]:
    """The serving version's name and whether its metadata reads (else its directory's name: found by review,
    a damaged serving version made every promotion end in a traceback, though any candidate should replace it)."""
    if serving is None:
        return None, False
    try:
        return model_meta(serving)[0], True
    except (OSError, ValueError, KeyError):
        return serving.name, False


def promote(candidate_dir: Path, models_root: Path, registry: Registry, nodes: Sequence[NodeView],
            pods: Sequence[JobRequest], replay: HeldOutReplay | None = None, *, sim: tuple[Any, Any, Any] | None = None,
            reuse_serving_evaluation: bool = True, latency_budget_ms: float | None = DEFAULT_LATENCY_BUDGET_MS,
            latency_inputs: tuple[Sequence[NodeView], Sequence[JobRequest]] | None = None) -> PromotionResult:  # fmt: skip
    """Evaluate ``candidate_dir`` against the serving version of ``models_root`` on the held-out
    fill replay of ``nodes`` / ``pods``, record both in the ``registry`` and move ``latest``
    only if the candidate is strictly better and fast enough (module docstring). ``sim``: the
    optional simulator slice (:func:`~inference.training.heldout.evaluate_held_out`); describe it
    in ``replay.extra`` so that a reused serving evaluation ran the same slice.
    ``latency_inputs``: the nodes and pods the model step is timed on (default ``nodes`` /
    ``pods``; describe them in ``replay.extra`` too); ``latency_budget_ms``: the p99 budget
    (None: no latency rule)."""
    replay = replay or HeldOutReplay()
    models_root = Path(models_root)
    version, target = check_candidate(Path(candidate_dir), models_root, replay.seeds)  # (the one gate; the CLI asks first)
    check_name(Path(candidate_dir), registry)
    candidate = Path(candidate_dir)  # evaluated where it is; copied into models_root only if promoted
    serving = serving_dir(models_root)
    serving_version, serving_readable = _serving_version(serving)
    created = datetime.now(UTC)
    registry.record(_row_for(candidate, "candidate", created_at=created, parent_version=serving_version or ""))

    probe = latency_probe(*(latency_inputs or (nodes, pods)), replay)
    serv_eval: dict[str, Any] | None = None
    serving_row: ModelVersion | None = None
    try:  # (minutes: an interruption is recorded, not left as a bare "candidate" row; found by review)
        cand_eval = evaluate_held_out(candidate, nodes, pods, replay, sim, probe) | {"weights": weights_digest(candidate)}
        if serving is not None and cand_eval.get("loaded") is not False:  # (one that does not load is rejected
            # whatever serves: found by review, the serving version's replay ran first all the same)
            serv_eval, serving_row = _serving_evaluation(registry, serving, serving_version or "", replay, nodes,
                                                         pods, reuse_serving_evaluation, sim, probe)  # fmt: skip
    except BaseException as e:
        registry.record(_row_for(candidate, "candidate", created_at=created, parent_version=serving_version or "",
                                 reason=f"evaluation interrupted: {type(e).__name__}: {e}"[:500]))  # fmt: skip
        raise
    if serving is not None and serv_eval is not None and serving_row is None and serving_readable:
        registry.record(_row_for(
            serving, "promoted", reason="serving before it was recorded (evaluated at the next promotion)",
            evaluation={"replay": replay.key(), "candidate": serv_eval, "serving": None},
            candidate_score=serv_eval.get("score"), decided_at=datetime.now(UTC)))  # fmt: skip
    status, reason = decide(cand_eval, serv_eval, serving_version, latency_budget_ms)
    with _promotion_lock(models_root):  # one promotion at a time decides what serves
        now = serving_dir(models_root)
        if now is not None and now == target.resolve():  # another promotion of this very candidate won meanwhile:
            status, candidate = "promoted", target  # (not a rejection of what serves; found by review)
            reason = f"already serving: another promotion of it ended during this evaluation (this one: {reason})"
        elif status == "promoted" and now != serving:  # another promotion won while this one was evaluated
            status = "rejected"
            reason = (f"{reason}; but {now.name if now else 'nothing'} serves now, not {serving_version}, which it was "
                      f"compared with (another promotion during the evaluation): judge it against the new serving "
                      f"version with semsched models promote {candidate_dir}")  # fmt: skip
        if status == "promoted" and now != target.resolve():
            from inference.model.io import point_latest

            reason += hot_swap_note(candidate, serving)
            candidate = _install(candidate, target)
            point_latest(models_root, candidate.name)
    row = registry.record(_row_for(
        candidate, status, created_at=created, parent_version=serving_version or "", reason=reason,
        evaluation={"replay": replay.key(), "candidate": cand_eval, "serving": serv_eval,
                    "serving_version": serving_version, "latency_budget_ms": latency_budget_ms},
        candidate_score=cand_eval.get("score"), serving_score=None if serv_eval is None else serv_eval.get("score"),
        decided_at=datetime.now(UTC)))  # fmt: skip
    latest = serving_dir(models_root)
    return PromotionResult(version=version, status=status, reason=reason, serving_version=serving_version,
                           candidate=cand_eval, serving=serv_eval, latest=latest.name if latest else None,
                           row=row)  # fmt: skip
