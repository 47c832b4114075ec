"""``streams/decision_records.py``: what a step's placements, rejections and waits become on
the ``decisions`` topic — model version, fallback and its reason, predicted cost and duration."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime

from inference.prepared_step import StepStatus
from scheduling.duration_estimate import HistoryDurationPredictor
from scheduling.events import DecisionRecord, JobSubmitted, decision_id_for
from scheduling.job import JobRequest
from scheduling.policies import get_policy
from scheduling.step_result import Placement
from streams.decision_records import (
    StepModel,
    held_placement_command,
    placed_record,
    placement_command,
    predicted_durations,
    rejected_record,
    waiting_record,
)
from streams.state import PendingJob, RunningJob, on_decision

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def pending(job_id: str = "j1", attempt: int = 0, **kw: object) -> PendingJob:
    j = JobSubmitted(job_id=job_id, event_id=f"ev-{job_id}", event_time=T0, cluster="c1", cpu_milli=2000,
                     memory_mib=4096, num_gpu=1, gpu_milli=500, trace_duration_s=60.0, **kw)  # fmt: skip
    return PendingJob(job=j, attempt=attempt, submit_ts=T0.timestamp(), queued_ts=T0.timestamp() + 30.0)


def placement(job_id: str = "j1") -> Placement:
    return Placement(job_id=job_id, node_index=3, node_id="n3", gpu_indices=(1,), score=0.9,
                     candidates=[("n3", 0.9), ("n1", 0.5)], feasible_nodes=7, reason="best fit")  # fmt: skip


@dataclass
class ModelBackedPolicy:
    """The attributes a model-backed policy (``inference.policy.LearnedPolicy``) exposes after
    a step, set by hand: the heuristic fell back for ``j2``."""

    name: str = "learned"
    fallback_name: str = "best-fit"
    last_step: StepStatus = field(default_factory=lambda: StepStatus("triton", "v7", True, "deadline exceeded"))
    fallback_jobs: set[str] = field(default_factory=lambda: {"j2"})

    def predicted_cost(self, job_id: str, node_index: int) -> float:
        return 10.0 * node_index + len(job_id)

    def predicted_run_time(self, job_id: str, node_index: int) -> float | None:
        return 3600.0 if job_id == "j1" else None


def test_a_heuristic_step_has_no_model_version_fallback_or_cost() -> None:
    model = StepModel.of(get_policy("best-fit"))
    rec = placed_record(pending(), placement(), cluster="c1", policy="best-fit", step_id="c1:0:1.000",
                        compute_ms=4.0, model=model, durations={}, now=T0.timestamp() + 2.0)  # fmt: skip
    assert rec.outcome == "placed" and rec.decision_id == rec.event_id == decision_id_for("j1", 0, "ev-j1")
    assert (rec.model_version, rec.fallback, rec.predicted_cost, rec.predicted_duration_s) == ("", False, None, None)
    assert rec.predicted_run_time_s is None
    assert rec.reason == "best fit"
    assert (rec.node_id, rec.gpu_indices, rec.feasible_nodes) == ("n3", [1], 7)
    assert [(c.node_id, c.score) for c in rec.candidates] == [("n3", 0.9), ("n1", 0.5)]
    assert rec.latency_ms == 2000.0  # from submission on the first attempt
    assert (rec.cpu_milli, rec.memory_mib, rec.gpu_milli_per_gpu, rec.trace_duration_s) == (2000, 4096, 500, 60.0)
    assert (rec.step_id, rec.step_compute_ms, rec.submit_time) == ("c1:0:1.000", 4.0, T0)


def test_a_model_backed_step_records_version_cost_and_only_the_fallback_jobs_reason() -> None:
    model = StepModel.of(ModelBackedPolicy())
    assert model.version == "v7"
    common = dict(cluster="c1", policy="learned", step_id="s", compute_ms=1.0, model=model,
                  durations={"j1": 120.0}, now=T0.timestamp())  # fmt: skip
    by_model = placed_record(pending("j1"), placement("j1"), **common)  # type: ignore[arg-type]
    by_fallback = placed_record(pending("j2"), placement("j2"), **common)  # type: ignore[arg-type]
    assert (by_model.model_version, by_model.fallback, by_model.reason) == ("v7", False, "best fit")
    assert by_fallback.fallback and by_fallback.model_version == "v7"
    assert by_fallback.reason == "best fit; triton fell back to best-fit: deadline exceeded"
    scored = dataclasses.replace(placement("j2"), reason="learned: highest score 50 of 7 feasible node(s)")
    assert placed_record(pending("j2"), scored, **common).reason == (  # type: ignore[arg-type]
        "best-fit: highest score 50 of 7 feasible node(s); triton fell back to best-fit: deadline exceeded")  # the heuristic's score
    assert placed_record(pending("j1"), dataclasses.replace(scored, job_id="j1"), **common).reason == (  # type: ignore[arg-type]
        "learned: highest score 50 of 7 feasible node(s)")
    assert by_model.predicted_cost == 32.0 and by_fallback.predicted_cost == 32.0
    assert by_model.predicted_run_time_s == 3600.0 and by_fallback.predicted_run_time_s is None
    assert by_model.predicted_duration_s == 120.0 and by_fallback.predicted_duration_s is None
    # its command says what its record says (found by review: the learned policy's reason, no version)
    fell_back = placed_record(pending("j2"), scored, **common)  # type: ignore[arg-type]
    cmd = placement_command(pending("j2"), fell_back)
    assert (cmd.reason, cmd.model_version, cmd.policy) == (fell_back.reason, "v7", "learned")


def test_a_policy_without_a_model_says_so_in_the_fallback_note() -> None:
    policy = ModelBackedPolicy(last_step=StepStatus("", None, True, "FileNotFoundError: models/latest"))
    assert StepModel.of(policy).fallback_note == "; no model fell back to best-fit: FileNotFoundError: models/latest"


def test_a_policys_note_on_a_decision_is_appended_to_its_reason() -> None:
    policy = ModelBackedPolicy()
    policy.decision_notes = {"j1": "lookahead over the next 2 job(s) through T: predicted path cost 0.100 GPU on n3"}  # type: ignore[attr-defined]
    model = StepModel.of(policy)
    policy.decision_notes = {}  # type: ignore[attr-defined]  # (the next step's; the step's own were read)
    common = dict(cluster="c1", policy="learned-lookahead", step_id="s", compute_ms=1.0, model=model, durations={},
                  now=T0.timestamp())  # fmt: skip
    noted = placed_record(pending("j1"), placement("j1"), **common)  # type: ignore[arg-type]
    plain = placed_record(pending("j3"), placement("j3"), **common)  # type: ignore[arg-type]
    assert noted.reason == "best fit; lookahead over the next 2 job(s) through T: predicted path cost 0.100 GPU on n3"
    assert plain.reason == "best fit"


def test_a_retry_counts_latency_from_its_requeue_and_gets_its_attempts_decision_id() -> None:
    rec = placed_record(pending(attempt=2), placement(), cluster="c1", policy="p", step_id="s", compute_ms=0.0,
                        model=StepModel(), durations={}, now=T0.timestamp() + 31.0)  # fmt: skip
    assert rec.latency_ms == 1000.0 and rec.attempt == 2 and rec.decision_id == decision_id_for("j1", 2, "ev-j1")
    cmd = placement_command(pending(attempt=2), rec)
    assert cmd.decision_id == rec.decision_id and (cmd.node_id, cmd.gpu_indices) == ("n3", [1])
    assert (cmd.cpu_milli, cmd.gpu_milli_per_gpu, cmd.reason, cmd.trace_duration_s) == (2000, 500, "best fit", 60.0)


def test_rejections_reuse_the_attempts_id_and_waiting_notes_get_fresh_ones() -> None:
    rej = rejected_record(pending(), "too big", policy="p", step_id="s", compute_ms=2.0, now=T0.timestamp() + 5)
    assert (rej.outcome, rej.decision_id, rej.latency_ms, rej.reason) == ("rejected", decision_id_for("j1", 0, "ev-j1"),
                                                                          5000.0, "too big")  # fmt: skip
    a, b = (waiting_record(pending(), "no GPU free", policy="p", step_id="s", compute_ms=2.0) for _ in range(2))
    assert a.outcome == "unschedulable" and a.decision_id.startswith("u-") and a.decision_id != b.decision_id
    assert a.event_id != b.event_id and a.latency_ms == 0.0 and a.node_id is None
    for rec in (rej, a):  # they survive the wire
        assert DecisionRecord.model_validate_json(rec.to_bytes()) == rec


def test_predicted_durations_leave_out_jobs_without_an_estimate() -> None:
    history = HistoryDurationPredictor(min_samples=1)
    reqs = [JobRequest.from_event(pending(f"j{i}", app="etl" if i else None).job) for i in range(2)]
    assert predicted_durations(history, reqs) == {}  # cold start: no estimate, no entry
    history.observe(reqs[1], 90.0)
    assert predicted_durations(history, reqs) == {"j0": 90.0, "j1": 90.0}  # j0 from the global median
    assert predicted_durations(history, []) == {}


def test_a_placements_command_has_one_event_id_and_one_sent_again_another() -> None:
    """The archive keeps one row per event id: the first command keeps its reason and time beside the one
    sent again (streams/uncommanded.py), however often each is sent; another placement, or another
    cluster's, is another event."""
    p, pl = pending(), placement()

    def record(pl: Placement, cluster: str = "c1") -> DecisionRecord:
        return placed_record(p, pl, cluster=cluster, policy="best-fit", step_id="s", compute_ms=1.0,
                             model=StepModel.of(get_policy("best-fit")), durations={})  # fmt: skip

    rec = record(pl)
    first = placement_command(p, rec)
    assert placement_command(p, record(pl)).event_id == first.event_id
    held = on_decision(rec, p).running["j1"]
    assert isinstance(held, RunningJob)
    again = held_placement_command(held, policy="best-fit", reason="again")
    assert (again.decision_id, again.node_id, again.gpu_indices) == (first.decision_id, "n3", [1])
    assert again.event_id != first.event_id
    assert held_placement_command(held, policy="best-fit", reason="again").event_id == again.event_id
    other_node = dataclasses.replace(pl, node_id="n4")
    assert placement_command(p, record(other_node)).event_id != first.event_id
    assert placement_command(p, record(pl, cluster="c2")).event_id != first.event_id
