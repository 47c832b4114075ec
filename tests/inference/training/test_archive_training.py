"""Training data from a real chdb archive, filled through the archive's own write path and read
back by ``storage.queries.training_events`` (what ``semsched train --from-archive`` does)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from training_helpers import SPEC, at, cluster_nodes, live_run

from inference.features.cluster import frag_pair_features
from inference.features.nodes import node_state
from inference.features.pairs import pair_features
from inference.model import ModelConfig, load_model
from inference.training import TrainOptions, train_imitation
from inference.training.archive import archive_spec, reconstruct
from inference.training.archive_events import ArchiveEvents, fold_events
from inference.training.archive_train import train_from_archive
from scheduling.metrics.fragmentation import Workload
from storage.queries.training_events import training_events
from storage.writer import ArchiveWriter

CONFIG = ModelConfig(spec=SPEC, hidden=16, depth=2, knn=3, head_hidden=16)


@pytest.fixture
def filled(archive):
    truths = live_run(ArchiveWriter(archive))
    return fold_events(training_events(archive)), truths


def test_read_archive_pairs_each_placement_with_its_outcome(filled):
    ev, truths = filled
    assert [n.node_id for n in ev.nodes["default"]] == [n.node_id for n in cluster_nodes()]
    by_id = {p.decision_id: p for p in ev.placed}
    assert set(by_id) == {t.decision_id for t in truths}  # placed decisions only (not the rejection)
    for t in truths:
        assert (by_id[t.decision_id].end_state or "running") == t.outcome
    assert ev.rejected == {("default", "huge"): pytest.approx(ev.jobs[("default", "huge")].submit_time + 0.5)}


def test_one_demonstration_per_placed_and_finished_decision(filled):
    events, truths = filled
    finished = [t for t in truths if t.outcome == "finished"]
    assert {t.outcome for t in truths} == {"finished", "failed", "running"}  # the scenario covers each case
    got = reconstruct(events, spec=SPEC, min_feasible=1, tied_targets=False)
    assert got.decision_ids == [t.decision_id for t in finished]  # in decision order
    assert got.placed == len(truths)
    assert got.skipped == {"outcome failed": sum(t.outcome == "failed" for t in truths),
                           "outcome running": sum(t.outcome == "running" for t in truths)}  # fmt: skip
    a = got.demos.arrays()
    for k, t in enumerate(finished):
        assert np.flatnonzero(a["target"][k]).tolist() == [t.node_index]  # the chosen node is the target
        # the rebuilt cluster state is the one the live policy saw: capacities consistent with
        # every archived placement and release before this decision (node and pair features
        # are functions of the free cpu, memory and per-GPU milli of every node)
        np.testing.assert_array_equal(a["nodes"][k], t.nodes)
        np.testing.assert_array_equal(a["pairs"][k], t.pairs)
        np.testing.assert_array_equal(a["feasible"][k], t.feasible)
        np.testing.assert_allclose(a["queues"][k], t.queue, atol=1e-6)
    assert len(got.demos.snapshots) == 1 and set(got.demos.group) == {0}


def test_a_decision_on_gpus_the_node_no_longer_reports_is_skipped_and_counted(filled):
    """The inventory is each node's latest report: a node that lost GPUs since a job held its last
    one (a failed GPU, a node replaced under the same id) made the rebuild raise (found by review:
    one such decision stopped ``semsched train --from-archive`` with a traceback)."""
    events, _ = filled
    [d] = [p for p in events.placed if p.gpu_indices][:1]  # (the scenario places GPU jobs: not a skip if not)
    nodes = events.nodes[d.cluster]
    k = next(n for n, v in enumerate(nodes) if v.node_id == d.node_id)
    fewer = max(d.gpu_indices)  # the GPU the decision held is gone
    nodes[k] = dataclasses.replace(nodes[k], num_gpu=fewer, gpu_alloc_milli=nodes[k].gpu_alloc_milli[:fewer])
    got = reconstruct(events, spec=SPEC, min_feasible=1, tied_targets=False)
    lost = [p for p in events.placed if p.node_id == d.node_id and p.gpu_indices and max(p.gpu_indices) >= fewer]
    assert got.skipped["GPUs the node no longer has"] == sum(p.end_state == "finished" for p in lost) > 0
    assert d.decision_id not in got.decision_ids and got.placed == len(events.placed)


def test_each_demonstration_carries_the_jobs_of_its_model_call_as_tokens(filled):
    events, truths = filled
    finished = [t for t in truths if t.outcome == "finished"]
    got = reconstruct(events, spec=SPEC, min_feasible=1)
    assert got.demos.has("tokens") and "tokens" not in got.demos.arrays()  # ragged: not stacked
    a = got.demos.arrays()
    for k, t in enumerate(finished):
        tokens = got.demos.tokens[k]
        assert len(tokens) == t.pending  # every job of the model call (those pending that fit somewhere then)
        np.testing.assert_array_equal(tokens[0], a["jobs"][k])  # its own job first
        np.testing.assert_allclose(tokens.mean(axis=0), t.queue, atol=1e-6)  # the rest: the step's other jobs
    assert max(t.pending for t in finished) > 3  # the scenario has queues
    few = reconstruct(events, spec=SPEC, min_feasible=1, max_tokens=3, seed=2)
    for k, t in enumerate(finished):  # a sample of the others when more were pending
        tokens, everything = few.demos.tokens[k], got.demos.tokens[k]
        assert len(tokens) == min(3, t.pending)
        np.testing.assert_array_equal(tokens[0], everything[0])
        assert all(any(np.allclose(row, other, atol=1e-6) for other in everything[1:]) for row in tokens[1:])
    with pytest.raises(ValueError, match="max_tokens"):
        reconstruct(events, spec=SPEC, max_tokens=0)


def test_the_archive_spec_has_fgds_columns_over_the_archived_workload(filled):
    events, _ = filled
    spec = archive_spec(events)
    assert spec.cluster and spec.workload == spec.workload_rows(Workload.from_jobs(events.jobs.values()))
    assert "fgd_first" in spec.pair_names and "frag_frac" in spec.node_names
    lean = archive_spec(events, cluster=False, frag=False)
    assert not lean.cluster and not lean.workload and "fgd_first" not in lean.pair_names


def test_the_archive_spec_takes_minilm_as_semsched_train_does(filled):
    """``semsched train --from-archive --encoder minilm``: the spec records MiniLM's name and size, and
    each demonstration's job row carries the job text's MiniLM embedding (serving resolves the same name)."""
    from inference.encoders import get_encoder
    from inference.features.jobs import job_demand

    events, _ = filled
    spec = archive_spec(events, encoder="minilm")
    assert spec.text_dim == 384 and spec.encoder == get_encoder("minilm").name != archive_spec(events).encoder
    got = reconstruct(events, spec=spec, min_feasible=1, max_samples=3)
    k = got.decision_ids[0]
    job = next(events.jobs[(p.cluster, p.job_id)] for p in events.placed if p.decision_id == k)
    want = job_demand([job], 0.0, spec, get_encoder(spec.encoder))[0]
    text = slice(spec.job_dim - spec.text_dim, spec.job_dim) if spec.job_names[-1].startswith("text") else None
    assert text is not None, spec.job_names
    np.testing.assert_allclose(got.demos.arrays()["jobs"][0][text], want[text], atol=1e-6)
    assert np.linalg.norm(want[text]) > 0.5  # an embedding, not zeros


def test_each_demonstration_carries_the_labels_of_the_cost_estimator_and_the_transition_model(filled):
    """What RecordingPolicy records from an expert, from the archive: the node picked, the fragmentation
    each placement would add (ψ), the run time (ψ: here the archived outcome), the picked node's row
    after the placement on its recorded GPUs (T); on the state the live policy saw."""
    events, truths = filled
    spec = archive_spec(events)
    got = reconstruct(events, spec=spec, min_feasible=1, outcomes=("finished", "failed"))
    kept = [t for t in truths if t.outcome in ("finished", "failed")]
    d = got.demos
    assert got.decision_ids == [t.decision_id for t in kept] and all(map(d.has, ("choice", "cost", "run_time", "next_row")))
    for k, t in enumerate(kept):
        job = events.jobs[("default", t.job_id)]
        assert d.choice[k] == t.node_index
        np.testing.assert_array_equal(d.pairs[k], pair_features(job, t.before, spec))
        np.testing.assert_array_equal(d.cost[k], frag_pair_features(job, t.before, spec)[:, 0])
        after = t.before.copy()
        after.reserve(t.node_index, job, t.gpus)
        np.testing.assert_array_equal(d.next_row[k], node_state(after, spec)[t.node_index])
        if t.outcome == "finished":  # no recorded run times (not a replay): its started (t + 0.2) to its finished
            assert d.run_time[k] == pytest.approx(t.duration - 0.2)
        else:
            assert np.isnan(d.run_time[k])  # a failed attempt's time is not the job's run time
    assert any(c.any() for c in d.cost)  # (placements that change the fragmentation)
    # a model without FGD's columns learns the same label (found by review: it learned 0 everywhere)
    lean = reconstruct(events, spec=archive_spec(events, frag=False), min_feasible=1, outcomes=("finished", "failed"))
    for k in range(len(kept)):
        np.testing.assert_array_equal(lean.demos.cost[k], d.cost[k])
    other = dataclasses.replace(events.jobs[("default", kept[0].job_id)], cluster="replayed", trace_duration_s=5.0)
    events.jobs[("replayed", other.job_id)] = other  # another cluster replayed into the same archive: not this one
    assert reconstruct(events, spec=spec, min_feasible=1).demos.run_time[0] == pytest.approx(kept[0].duration - 0.2)
    key = ("default", kept[0].job_id)  # a replay's submissions carry the trace's run times: those are the labels
    events.jobs[key] = dataclasses.replace(events.jobs[key], trace_duration_s=4321.0)
    run_times = reconstruct(events, spec=spec, min_feasible=1).demos.run_time
    assert run_times[0] == 4321.0 and np.isnan(run_times[1:]).all()  # (what the sped-up agents took is not)


def _lag_free(events) -> None:
    """Each decision's ``lifecycle_through`` as a worker without lag has it: every report sent by the
    decision's time applied (the reports of the attempts' ends are the archive's offsets)."""
    ends = [(p.end_time, p.end_position[1]) for p in events.placed if p.end_position is not None]
    for d in events.placed:
        d.lifecycle_through = 1 + max((o for t, o in ends if t <= d.time), default=-1)


def test_a_decision_sees_the_reports_its_step_had_applied(filled):
    """Under load the worker applies a report seconds after its agent sent it: each decision says
    which reports its step had applied (``lifecycle_through``), and the rebuilt state frees a placement
    from the first decision that had applied its end on, whatever the end's event time."""
    events, truths = filled
    outcomes = ("finished", "failed", "running")
    _lag_free(events)
    got = reconstruct(events, spec=SPEC, min_feasible=1, outcomes=outcomes)
    assert got.decision_ids == [t.decision_id for t in truths]
    for k, t in enumerate(truths):  # the same states as the event times give when nothing lags
        np.testing.assert_array_equal(got.demos.pairs[k], t.pairs)
    # the first decision of the last step at whose time an attempt ended (elsewhere than where it places);
    # it had not applied that end yet
    first = [k for k, d in enumerate(events.placed) if k == 0 or events.placed[k - 1].time < d.time]
    def last_end_at(t: float):  # noqa: ANN202
        return max((p for p in events.placed if p.end_time == t), key=lambda p: p.end_position, default=None)

    k, late = next((k, e) for k in reversed(first) if (e := last_end_at(events.placed[k].time)) is not None
                   and e.node_id != events.placed[k].node_id)  # fmt: skip
    events.placed[k].lifecycle_through = late.end_position[1]  # the reports below its end handled, not it
    got = reconstruct(events, spec=SPEC, min_feasible=1, outcomes=outcomes)
    by_id = {t.decision_id: t for t in truths}
    held = by_id[events.placed[k].decision_id].before.copy()
    held.reserve(by_id[late.decision_id].node_index, events.jobs[("default", late.job_id)], by_id[late.decision_id].gpus)
    job_k = events.jobs[("default", events.placed[k].job_id)]  # (pair features: the current state; the node state
    # is the model call's, from the step's start: inference/training/queue_windows.py)
    np.testing.assert_array_equal(got.demos.pairs[k], pair_features(job_k, held, SPEC))  # its node as the worker saw it
    assert not np.array_equal(got.demos.pairs[k], truths[k].pairs)
    for j, t in enumerate(truths):  # the step's next decisions had applied it: freed again
        if j != k:
            np.testing.assert_array_equal(got.demos.pairs[j], t.pairs)
    for d in events.placed[:k]:  # archived before the column: the event times, until the decisions say
        d.lifecycle_through = None
    got = reconstruct(events, spec=SPEC, min_feasible=1, outcomes=outcomes)
    for j, t in enumerate(truths):
        np.testing.assert_array_equal(got.demos.pairs[j], pair_features(job_k, held, SPEC) if j == k else t.pairs)
    assert k > 0


def test_decisions_say_on_which_partition_and_the_topics_partitions_may_change(filled):
    """Offsets compare within one partition: when the topics get more partitions and the cluster moves to
    a new one (offsets from 0 again), an end on the old partition is freed at its event time, and the new
    partition's watermarks free only the new partition's ends (found by review: a bare offset kept the old
    partition's high watermark and freed every later placement at the next decision)."""
    events, truths = filled
    m = len(events.placed) // 2
    moved = events.placed[m:]
    for n, p in enumerate(sorted((p for p in moved if p.end_position), key=lambda p: p.end_position)):
        p.end_position = (1, n)  # their ends on the new partition, in the same order
    for d in events.placed:
        d.partition = 1 if d in moved else 0
        ends = [p for p in events.placed if p.end_position and p.end_position[0] == d.partition and p.end_time <= d.time]
        d.lifecycle_through = 1 + max((p.end_position[1] for p in ends), default=-1)
    got = reconstruct(events, spec=SPEC, min_feasible=1, outcomes=("finished", "failed", "running"))
    assert got.decision_ids == [t.decision_id for t in truths]
    for k, t in enumerate(truths):
        np.testing.assert_array_equal(got.demos.pairs[k], t.pairs)


def test_an_end_the_old_partition_had_not_handled_at_the_move_is_freed_at_its_event_time(filled):
    """The review's second look: the last decision on the old partition had not handled an end yet, and
    every later decision is on the new partition: the end is freed at its event time, not held for ever."""
    events, truths = filled
    _lag_free(events)
    first = [k for k, d in enumerate(events.placed) if k == 0 or events.placed[k - 1].time < d.time]
    k, late = next((k, e) for k in reversed(first[:-1]) if (e := _last_end_at(events, events.placed[k].time))
                   and e.node_id != events.placed[k].node_id)  # fmt: skip
    events.placed[k].lifecycle_through = late.end_position[1]  # the last decision on the old partition
    moved = events.placed[k + 1:]
    after = sorted((p for p in events.placed if p.end_position and p.end_time > events.placed[k].time),
                   key=lambda p: p.end_position)  # fmt: skip
    for n, p in enumerate(after):  # ends after the move: on the new partition
        p.end_position = (1, n)
    for d in moved:
        d.partition = 1
        d.lifecycle_through = 1 + max((n for n, p in enumerate(after) if p.end_time <= d.time), default=-1)
    got = reconstruct(events, spec=SPEC, min_feasible=1, outcomes=("finished", "failed", "running"))
    assert got.decision_ids == [t.decision_id for t in truths]
    assert not np.array_equal(got.demos.pairs[k], truths[k].pairs)  # (it had not handled it)
    for j in range(k + 1, len(truths)):
        np.testing.assert_array_equal(got.demos.pairs[j], truths[j].pairs)


def _last_end_at(events, t: float):  # noqa: ANN001, ANN202
    return max((p for p in events.placed if p.end_time == t), key=lambda p: p.end_position, default=None)


def test_an_attempts_end_is_the_one_the_worker_applied_first(archive):
    """In the topic's order: a ``timed_out`` after the attempt's ``started`` is no end (the worker keeps
    the run), nor an end from another node than the one it started on (a fenced second execution's);
    of two ends the first in the topic, whatever their event times; and when it started. Written to the
    archive and read back with the decisions' watermarks and partitions."""
    from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry

    def life(job: str, state: str, s: float, node: str = "n1") -> JobLifecycle:
        return JobLifecycle(event_id=f"{job}-{state}-{node}", event_time=at(s), job_id=job, state=state, node_id=node,
                            decision_id=f"d-{job}", exit_code=0 if state == "finished" else None)  # fmt: skip

    subs = [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j, cpu_milli=100) for j in "abcd"]
    decisions = [DecisionRecord(event_id=f"d-{j}", decision_id=f"d-{j}", event_time=at(1), job_id=j, outcome="placed",
                                node_id="n1", policy="best-fit", latency_ms=1.0, cpu_milli=100, lifecycle_through=w)
                 for j, w in (("a", None), ("b", 7), ("c", 2**63 - 1), ("d", 0))]  # fmt: skip
    reports = [life("a", "started", 10), life("a", "timed_out", 9), life("a", "finished", 20),  # a timeout that raced
               life("b", "timed_out", 12), life("b", "started", 11),  # timed out first: the worker re-queued it
               life("c", "finished", 31), life("c", "preempted", 30),  # the first in the topic
               life("d", "started", 40), life("d", "preempted", 41, node="n2"), life("d", "finished", 50)]  # fmt: skip
    writer = ArchiveWriter(archive)
    writer.write("jobs_submitted", subs, [(0, i) for i in range(len(subs))])
    writer.write("nodes_telemetry", [NodeTelemetry(event_id="t-n1", event_time=at(-1), node_id="n1", cpu_milli=4000,
                                                   memory_mib=4096)], [(0, 0)])  # fmt: skip
    writer.write("decisions", decisions, [(3, i) for i in range(len(decisions))])
    writer.write("jobs_lifecycle", reports, [(3, 10 + i) for i in range(len(reports))])
    placed = {p.job_id: p for p in fold_events(training_events(archive)).placed}
    assert {j: (p.end_state, p.end_time, p.end_position, p.started_time, p.partition, p.lifecycle_through)
            for j, p in placed.items()} == {
        "a": ("finished", at(20).timestamp(), (3, 12), at(10).timestamp(), 3, None),
        "b": ("timed_out", at(12).timestamp(), (3, 13), at(11).timestamp(), 3, 7),
        "c": ("finished", at(31).timestamp(), (3, 15), None, 3, 2**63 - 1),
        "d": ("finished", at(50).timestamp(), (3, 19), at(40).timestamp(), 3, 0)}  # fmt: skip


def test_a_model_with_job_tokens_trains_on_the_recorded_queues(filled, tmp_path):
    from inference.training.imitation import _Data

    events, _ = filled
    demos = reconstruct(events, spec=SPEC, min_feasible=1).demos
    config = dataclasses.replace(CONFIG, job_tokens=2)
    rows, mask = _Data(demos, config).job_tokens(torch.arange(len(demos)))
    for k, tokens in enumerate(demos.tokens):  # the recorded queue, zero-padded, not a window of later states
        np.testing.assert_array_equal(rows[k, : len(tokens)].numpy(), tokens)
        assert mask[k].sum() == len(tokens) and not rows[k, len(tokens):].any()
    assert _Data(demos, CONFIG).job_tokens(torch.arange(2)) == (None, None)  # a model without job tokens
    directory = train_from_archive(events, tmp_path / "models", options=TrainOptions(epochs=2, batch=8, seed=1),
                                   hidden=16, depth=2, text_dim=SPEC.text_dim, job_tokens=2, version="tokens")  # fmt: skip
    info = json.loads((directory / "train.json").read_text())
    assert load_model(directory).config.job_tokens == 2 and info["job_tokens"] == 2 and info["max_tokens"] == 64


def test_targets_include_the_archived_candidates_tied_with_the_choice(filled):
    events, truths = filled
    finished = [t for t in truths if t.outcome == "finished"]
    got = reconstruct(events, spec=SPEC, min_feasible=1, tied_targets=True)
    assert got.decision_ids == [t.decision_id for t in finished]
    targets = [set(np.flatnonzero(x).tolist()) for x in got.demos.target]
    assert targets == [set(t.tied) | {t.node_index} for t in finished]
    assert any(len(x) > 1 for x in targets)  # best-fit ties between identical empty nodes


def test_outcome_filter_sampling_and_informative_states(filled):
    events, truths = filled
    both = reconstruct(events, spec=SPEC, min_feasible=1, outcomes=("finished", "failed"))
    assert len(both.demos) == sum(t.outcome in ("finished", "failed") for t in truths)
    informative = reconstruct(events, spec=SPEC, tied_targets=True)  # at least 2 feasible nodes, not all tied
    useless = sum(t.outcome == "finished" and (t.feasible.sum() < 2 or len(t.tied | {t.node_index}) == t.feasible.sum())
                  for t in truths)  # fmt: skip
    assert len(informative.demos) == sum(t.outcome == "finished" for t in truths) - useless
    single = reconstruct(events, spec=SPEC)  # default: the chosen node alone, at least 2 feasible
    assert len(single.demos) == sum(t.outcome == "finished" and t.feasible.sum() >= 2 for t in truths)
    sample = reconstruct(events, spec=SPEC, min_feasible=1, max_samples=5, seed=3)
    assert len(sample.demos) == 5 and set(sample.decision_ids) <= {t.decision_id for t in truths}
    assert reconstruct(events, spec=SPEC, policies=["fgd"]).demos.target == []


def test_archive_demonstrations_train_the_scorer(filled):
    events, _ = filled
    demos = reconstruct(events, spec=SPEC).demos
    model, history = train_imitation(demos, CONFIG, TrainOptions(epochs=15, batch=8, lr=1e-2, seed=0))
    assert history.loss[-1] < 0.7 * history.loss[0]
    assert history.agreement[-1] > 0.6


def test_train_from_archive_writes_a_versioned_archive_model(filled, tmp_path):
    events, truths = filled
    events.placed[:] = [dataclasses.replace(p, model_version="v7") if k % 2 else p for k, p in enumerate(events.placed)]
    out = tmp_path / "models"
    directory = train_from_archive(events, out, config=CONFIG, options=TrainOptions(epochs=3, batch=8, seed=1),
                                   version="archive-test", archive="chdb://test")  # fmt: skip
    assert directory == out / "archive-test" and not (out / "latest").exists()  # promotion decides what serves
    info = json.loads((directory / "train.json").read_text())
    assert info["source"] == "archive" and info["expert"] == "best-fit"
    assert info["train_states"] + info["val_states"] == info["reconstruction"]["demonstrations"] > 0
    assert 0 < info["imitated_model_versions"]["v7"] < info["reconstruction"]["demonstrations"]  # whose decisions
    assert info["val_states"] >= 1
    loaded = load_model(directory)
    assert loaded.version == "archive-test" and loaded.config == CONFIG


def test_train_from_archive_builds_the_model_semsched_train_does(filled, tmp_path):
    """By default: FGD's columns over the archived workload, the cluster columns, ψ and T trained on
    their labels (their losses fall); without them, the lean model without ψ and T."""
    events, _ = filled
    options = TrainOptions(epochs=4, batch=8, seed=1, target="choice", cost_weight=0.1, transition_weight=0.1)
    directory = train_from_archive(events, tmp_path / "models", options=options, hidden=16, text_dim=SPEC.text_dim,
                                   version="full")  # fmt: skip
    config, info = load_model(directory).config, json.loads((directory / "train.json").read_text())
    # FGD's workload: the submissions before the validation period (not the validation period's own)
    assert info["val_cut"] is not None and config.spec == archive_spec(events, SPEC.text_dim, before=info["val_cut"])
    assert config.spec.workload != archive_spec(events, SPEC.text_dim).workload
    assert config.cost_dim == 2 and config.transition
    assert info["features"] == {"cluster": True, "frag": True} and info["aux_weights"]["cost"] == 0.1
    aux = info["history"]["aux"]
    for part in ("cost", "run_time", "transition"):
        assert aux[-1][part] < aux[0][part]
    lean = train_from_archive(events, tmp_path / "models", options=TrainOptions(epochs=1, batch=8, seed=1),
                              hidden=16, text_dim=SPEC.text_dim, version="lean", cluster=False, frag=False)  # fmt: skip
    config = load_model(lean).config
    assert not config.spec.workload and not config.spec.cluster and config.cost_dim == 0 and not config.transition
    damped = train_from_archive(events, tmp_path / "models", options=TrainOptions(epochs=1, batch=8, seed=1),
                                hidden=16, text_dim=SPEC.text_dim, version="damped", stability=0.5)  # fmt: skip
    config = load_model(damped).config
    assert config.stability == 0.5 and config.transition  # Δ damping needs T, as semsched train builds it


def test_a_job_stamped_by_a_clock_ahead_is_not_left_pending_in_later_steps(archive):
    """A submission stamped after its own placement (the producer's clock ahead of the worker's,
    within the skew it accepts), and a failed attempt's end stamped after the retry's placement (the
    agent's clock ahead), put the job back in the queue after it was placed: it stayed pending in
    every later step's tokens and queue summary (found by review)."""
    from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry

    def sub(job: str, s: float) -> JobSubmitted:
        return JobSubmitted(event_id=f"s-{job}", event_time=at(s), job_id=job, cpu_milli=100)

    def dec(job: str, s: float, attempt: int = 0) -> DecisionRecord:
        return DecisionRecord(event_id=f"d-{job}-{attempt}", decision_id=f"d-{job}-{attempt}", event_time=at(s),
                              job_id=job, attempt=attempt, outcome="placed", node_id="n1", policy="best-fit",
                              latency_ms=1.0, cpu_milli=100, step_id=f"step-{s}")  # fmt: skip

    def life(job: str, state: str, s: float, attempt: int = 0) -> JobLifecycle:
        return JobLifecycle(event_id=f"{job}-{state}-{attempt}", event_time=at(s), job_id=job, state=state,
                            node_id="n1", attempt=attempt, decision_id=f"d-{job}-{attempt}",
                            exit_code=0 if state == "finished" else 1)  # fmt: skip

    subs = [sub("early", 1.5), sub("retried", 2), sub("x", 10), sub("y", 40)]
    decisions = [dec("early", 1), dec("retried", 3), dec("retried", 25, attempt=1), dec("x", 11), dec("y", 41)]
    reports = [life("early", "started", 1.2), life("early", "finished", 90),
               life("retried", "started", 3.1), life("retried", "failed", 30),  # its end after the retry's placement
               life("retried", "started", 25.2, 1), life("retried", "finished", 90, 1),
               life("x", "started", 11.2), life("x", "finished", 90), life("y", "started", 41.2),
               life("y", "finished", 90)]  # fmt: skip
    writer = ArchiveWriter(archive)
    writer.write("jobs_submitted", subs, [(0, i) for i in range(len(subs))])
    writer.write("nodes_telemetry", [NodeTelemetry(event_id="t-n1", event_time=at(-1), node_id="n1", cpu_milli=4000,
                                                   memory_mib=4096)], [(0, 0)])  # fmt: skip
    writer.write("decisions", decisions, [(0, i) for i in range(len(decisions))])
    writer.write("jobs_lifecycle", reports, [(0, 10 + i) for i in range(len(reports))])
    got = reconstruct(fold_events(training_events(archive)), spec=SPEC, min_feasible=1, outcomes=("finished", "failed"))
    # one demonstration per decision, in time order (early, retried, x, retried again, y): each step's
    # queue held its own job only (before: "early" was pending from x's step on, "retried" at y's)
    assert [len(t) for t in got.demos.tokens] == [1, 1, 1, 1, 1]


def test_the_training_half_learns_what_was_known_at_the_validation_cut(archive):
    """A decision before the cut is judged by what was known of it then: an attempt that ended after
    the cut was running (not a finished demonstration; no run-time label), and the cut does not split
    a step's decisions, which share their time (found by review: the training half learned outcomes
    and run times from the validation period, and a split by rank cut a step in two)."""
    from inference.training.archive_train import validation_cut
    from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry

    decided = {f"j{i}": float(i) for i in range(7)} | {"s1": 9.0, "s2": 9.0, "s3": 9.0}  # s*: one step at 9 s
    ends = {j: t + 0.5 for j, t in decided.items()} | {"j5": 30.0}  # j5 ends in the validation period
    subs = [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j, cpu_milli=100) for j in decided]
    decisions = [DecisionRecord(event_id=f"d-{j}", decision_id=f"d-{j}", event_time=at(t), job_id=j, outcome="placed",
                                node_id="n1", policy="best-fit", latency_ms=1.0, cpu_milli=100, step_id=f"step-{t}")
                 for j, t in decided.items()]  # fmt: skip
    reports = [r for j, t in decided.items() for r in (
        JobLifecycle(event_id=f"{j}-s", event_time=at(t + 0.1), job_id=j, state="started", node_id="n1",
                     decision_id=f"d-{j}"),
        JobLifecycle(event_id=f"{j}-f", event_time=at(ends[j]), job_id=j, state="finished", node_id="n1",
                     decision_id=f"d-{j}", exit_code=0))]  # fmt: skip
    writer = ArchiveWriter(archive)
    writer.write("jobs_submitted", subs, [(0, i) for i in range(len(subs))])
    writer.write("nodes_telemetry", [NodeTelemetry(event_id=f"t-{n}", event_time=at(-1), node_id=n, cpu_milli=4000,
                                                   memory_mib=4096) for n in ("n1", "n2")], [(0, 0), (0, 1)])  # fmt: skip
    writer.write("decisions", decisions, [(0, i) for i in range(len(decisions))])
    writer.write("jobs_lifecycle", reports, [(0, 10 + i) for i in range(len(reports))])
    events = fold_events(training_events(archive))
    cut = validation_cut(events, ("finished",), None, 0.15)  # 2 of 10 by rank: the whole step at 9 s
    assert cut == at(9).timestamp()
    got = reconstruct(events, spec=SPEC, min_feasible=1, cut=cut)
    assert sorted(got.decision_ids) == sorted(f"d-{j}" for j in decided if j != "j5")  # j5: running at the cut
    assert got.skipped["outcome running"] == 1
    both = reconstruct(events, spec=SPEC, min_feasible=1, cut=cut, outcomes=("finished", "running"))
    run_time = dict(zip(both.decision_ids, both.demos.run_time, strict=True))
    assert np.isnan(run_time["d-j5"]) and run_time["d-j4"] == pytest.approx(0.4)  # j5's end came after the cut
    assert run_time["d-s1"] == pytest.approx(0.4)  # a validation decision: as known now


def test_a_fallbacks_placements_are_not_imitated_as_the_learned_policys(archive):
    """A step the model did not answer was decided by the fallback heuristic: its records say fallback.
    Filtering on ``learned`` must not take them, and the counts name them apart (found by review)."""
    from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry

    writer = ArchiveWriter(archive)
    jobs = ["a", "b", "c"]
    writer.write("jobs_submitted", [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j, cpu_milli=100)
                                    for j in jobs], [(0, i) for i in range(3)])  # fmt: skip
    writer.write("nodes_telemetry", [NodeTelemetry(event_id=f"t-{n}", event_time=at(-1), node_id=n, cpu_milli=4000,
                                                   memory_mib=4096) for n in ("n1", "n2")], [(0, 0), (0, 1)])  # fmt: skip
    writer.write("decisions", [DecisionRecord(event_id=f"d-{j}", decision_id=f"d-{j}", event_time=at(1 + i), job_id=j,
                                              outcome="placed", node_id="n1", policy="learned", latency_ms=1.0,
                                              cpu_milli=100, fallback=(j == "b"), model_version="v1")
                               for i, j in enumerate(jobs)], [(0, i) for i in range(3)])  # fmt: skip
    writer.write("jobs_lifecycle", [JobLifecycle(event_id=f"{j}-f", event_time=at(9), job_id=j, state="finished",
                                                 node_id="n1", decision_id=f"d-{j}", exit_code=0) for j in jobs],
                 [(0, 10 + i) for i in range(3)])  # fmt: skip
    events = fold_events(training_events(archive))
    everything = reconstruct(events, spec=SPEC, min_feasible=1)
    assert everything.policies == {"learned": 2, "learned (fallback)": 1}
    learned = reconstruct(events, spec=SPEC, min_feasible=1, policies=["learned"])
    assert sorted(learned.decision_ids) == ["d-a", "d-c"] and learned.skipped["policy learned (fallback)"] == 1


def test_two_clusters_reusing_a_job_id_each_free_their_own_placement(archive):
    """Clusters a and b (two workers) both ran a job "job1" on their node n1's one GPU, under the same
    decision id; a's ended at 10 s, b's at 20 s, and b then placed job2 there. The replay kept its held
    placements by decision id alone: a's end freed it, b's found nothing to free, and b's n1 stayed full,
    so job2's choice read infeasible and was skipped (found by review)."""
    from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry, decision_id_for

    writer = ArchiveWriter(archive)
    for cluster, p, ran in (("a", 0, (("job1", 2.0, 10.0),)), ("b", 1, (("job1", 2.0, 20.0), ("job2", 30.0, None)))):
        writer.write("nodes_telemetry", [NodeTelemetry(event_id=f"t-{cluster}", event_time=at(-1), node_id="n1",
                                                       cluster=cluster, cpu_milli=4000, memory_mib=4096, num_gpu=1,
                                                       gpu_model="T4")], [(p, 0)])  # fmt: skip
        for k, (job, start, end) in enumerate(ran):
            did = decision_id_for(job, 0, "sub")
            writer.write("jobs_submitted", [JobSubmitted(event_id=f"s-{cluster}-{job}", event_time=at(start - 1.5),
                                                         job_id=job, cluster=cluster, cpu_milli=100, num_gpu=1,
                                                         gpu_milli=1000)], [(p, 10 + k)])  # fmt: skip
            writer.write("decisions", [DecisionRecord(event_id=did, decision_id=did, event_time=at(start - 1),
                                                      job_id=job, cluster=cluster, outcome="placed", node_id="n1",
                                                      gpu_indices=[0], gpu_milli_per_gpu=1000, policy="best-fit",
                                                      latency_ms=1.0, cpu_milli=100,
                                                      step_id=f"{cluster}:{start}")], [(p, 20 + k)])  # fmt: skip
            reports = [("started", start)] + ([] if end is None else [("finished", end)])
            writer.write("jobs_lifecycle", [JobLifecycle(event_id=f"l-{cluster}-{job}-{state}", event_time=at(s),
                                                         job_id=job, cluster=cluster, state=state, node_id="n1",  # type: ignore[arg-type]
                                                         decision_id=did, exit_code=0 if state == "finished" else None)
                                            for state, s in reports], [(p, 30 + 2 * k + i) for i in range(len(reports))])  # fmt: skip
    got = reconstruct(fold_events(training_events(archive)), spec=SPEC, min_feasible=1,
                      outcomes=("finished", "running"))  # fmt: skip
    assert not got.skipped.get("chosen node infeasible in the rebuilt state"), got.skipped
    assert [s.split()[-1] for s in got.demos.source] == [decision_id_for("job1", 0, "sub")] * 2 + [decision_id_for("job2", 0, "sub")]
    assert len(reconstruct(fold_events(training_events(archive)), spec=SPEC, min_feasible=1,
                           outcomes=("finished", "running"), max_samples=2).demos.target) == 2  # fmt: skip


def test_a_decision_whose_rebuilt_state_is_not_the_workers_is_skipped(archive):
    """n2 first reported after the decision (the worker had one feasible node; the rebuilt inventory, every
    node's latest report from the start, has two): the demonstration would teach "n1 over an empty n2",
    a choice the worker never had (found by review). A decision that recorded no count is kept."""
    from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry

    writer = ArchiveWriter(archive)
    writer.write("jobs_submitted", [JobSubmitted(event_id=f"s-{j}", event_time=at(0), job_id=j, cpu_milli=100)
                                    for j in ("a", "b")], [(0, 0), (0, 1)])  # fmt: skip
    writer.write("nodes_telemetry", [NodeTelemetry(event_id=f"t-{n}", event_time=at(t), node_id=n, cpu_milli=4000,
                                                   memory_mib=4096) for n, t in (("n1", -1), ("n2", 100))],
                 [(0, 0), (0, 1)])  # fmt: skip
    writer.write("decisions", [DecisionRecord(event_id=f"d-{j}", decision_id=f"d-{j}", event_time=at(1), job_id=j,
                                              outcome="placed", node_id="n1", policy="best-fit", latency_ms=1.0,
                                              cpu_milli=100, feasible_nodes=n) for j, n in (("a", 1), ("b", 0))],
                 [(0, 0), (0, 1)])  # fmt: skip
    writer.write("jobs_lifecycle", [JobLifecycle(event_id=f"{j}-f", event_time=at(9), job_id=j, state="finished",
                                                 node_id="n1", decision_id=f"d-{j}", exit_code=0) for j in ("a", "b")],
                 [(0, 10), (0, 11)])  # fmt: skip
    got = reconstruct(fold_events(training_events(archive)), spec=SPEC, min_feasible=1)
    assert got.decision_ids == ["d-b"] and got.skipped["rebuilt state not the worker's (feasible nodes)"] == 1


def test_a_training_half_with_nothing_known_at_the_cut_is_nothing_to_learn(tmp_path):
    """Every decision before the validation cut ended after it (judged running at the cut): no training
    state. It was a plain ValueError from the trainer, a traceback out of the CLI (found by the review
    of the change)."""
    from datetime import UTC, datetime

    from inference.training.archive_events import ArchiveEvents, Placed
    from inference.training.archive_train import NothingToLearnError
    from scheduling.events import JobSubmitted, NodeTelemetry
    from scheduling.job import JobRequest
    from scheduling.node import NodeView

    events = ArchiveEvents()
    events.nodes["c"] = [NodeView.from_telemetry(NodeTelemetry(event_id=f"t{i}", event_time=datetime.fromtimestamp(1, UTC),
                                                               node_id=f"n{i}", cluster="c", cpu_milli=64000,
                                                               memory_mib=65536, num_gpu=8, gpu_model="T4"),
                                                 with_allocation=False) for i in range(4)]  # fmt: skip
    for i in range(10):
        job = JobSubmitted(event_id=f"s{i}", event_time=datetime.fromtimestamp(99 + i, UTC), job_id=f"j{i}", cluster="c",
                           cpu_milli=100, num_gpu=1, gpu_milli=1000)  # fmt: skip
        events.jobs[("c", f"j{i}")] = JobRequest.from_event(job)
        events.placed.append(Placed(decision_id=f"d{i}", job_id=f"j{i}", cluster="c", attempt=0, node_id="n0",
                                    gpu_indices=(0,), policy="best-fit", model_version="", fallback=False,
                                    step_id=f"c:{i}", time=100.0 + i, cpu_milli=100, memory_mib=0,
                                    gpu_milli_per_gpu=1000, end_state="finished", end_time=300.0,
                                    started_time=100.5 + i))  # fmt: skip
    with pytest.raises(NothingToLearnError, match="no decision before the validation cut"):
        train_from_archive(events, tmp_path, val_share=0.2, min_feasible=1)


def test_a_sample_of_a_grown_archive_keeps_the_earlier_sample_but_for_what_new_decisions_displace(filled):
    """Found by review: the sample was a seeded draw over the decisions in time order, so one more archived
    decision changed the whole sample (and the training set) of the next run."""
    events, _ = filled
    earlier = dataclasses.replace(events, placed=events.placed[:-4])
    new_ids = {p.decision_id for p in events.placed[-4:]}
    before = set(reconstruct(earlier, spec=SPEC, min_feasible=1, max_samples=5, seed=3).decision_ids)
    after = set(reconstruct(events, spec=SPEC, min_feasible=1, max_samples=5, seed=3).decision_ids)
    assert len(before) == len(after) == 5
    assert len(before - after) <= len(after & new_ids)


def _after(seconds: float):  # noqa: ANN202
    from datetime import timedelta

    return at(0) + timedelta(seconds=seconds)


def _two_jobs(placed: list[tuple[str, str, float, str]], ends: list) -> ArchiveEvents:  # noqa: ANN001
    """Jobs A and B submitted at 0 on three CPU nodes n0-n2, placed as ``(decision id, job, seconds, node)``
    says (each decision its own step), with the lifecycle reports ``ends``: the folded events."""
    from scheduling.events import DecisionRecord, JobSubmitted, NodeTelemetry
    from storage.queries.training_events import TrainingEvents

    nodes = [NodeTelemetry(event_id=f"t{i}", event_time=_after(-5), node_id=f"n{i}", source="inventory",
                           cpu_milli=8000, memory_mib=32000, num_gpu=0) for i in range(3)]  # fmt: skip
    subs = [JobSubmitted(event_id=f"s{j}", event_time=_after(0), job_id=j, cpu_milli=1000, memory_mib=100, num_gpu=0)
            for j in "AB"]  # fmt: skip
    decisions = [DecisionRecord(event_id=d, decision_id=d, event_time=_after(s), job_id=j, outcome="placed",
                                node_id=n, policy="fgd", latency_ms=1, cpu_milli=1000, memory_mib=100,
                                step_id=f"st{s}") for d, j, s, n in placed]  # fmt: skip
    return fold_events(TrainingEvents(nodes=nodes, submissions=subs, placed=decisions, placed_partitions=[0] * len(placed),
                                      ends=ends, end_positions=[(0, i) for i in range(len(ends))]))  # fmt: skip


@pytest.mark.parametrize("gave_up", [False, True])
def test_a_failed_attempt_s_job_is_in_the_later_queues_until_retried_or_given_up(gave_up):
    """Found by review: a failed attempt's job came back to the rebuilt queue only if its retry was placed
    later; while the retry was pending (at the end of the archive, say) the later steps' queues lacked it. The
    worker queues it again or gives it up with a rejection at the same time (streams/state.py)."""
    from inference.features.spec import FeatureSpec
    from scheduling.events import JobLifecycle

    t = _after
    ends = [JobLifecycle(event_id="e1", event_time=t(1.1), job_id="A", state="started", node_id="n0", decision_id="dA"),
            JobLifecycle(event_id="e2", event_time=t(5), job_id="A", state="failed", exit_code=1, node_id="n0",
                         decision_id="dA"),
            JobLifecycle(event_id="e3", event_time=t(10.1), job_id="B", state="started", node_id="n1", decision_id="dB"),
            JobLifecycle(event_id="e4", event_time=t(20), job_id="B", state="finished", exit_code=0, node_id="n1",
                         decision_id="dB")]  # fmt: skip
    if gave_up:
        ends.insert(2, JobLifecycle(event_id="e2-x", event_time=t(5), job_id="A", attempt=1, state="rejected"))
    events = _two_jobs([("dA", "A", 1, "n0"), ("dB", "B", 10, "n1")], ends)
    rebuilt = reconstruct(events, spec=FeatureSpec(gpu_models=(), text_dim=8, encoder="hashed-ngram-8"), min_feasible=1)
    assert rebuilt.decision_ids == ["dB"]
    assert len(rebuilt.demos.tokens[0]) == (1 if gave_up else 2)  # B itself, and A's retry while it was pending


def test_a_decision_whose_attempt_started_on_another_node_is_not_imitated():
    """Found by review: in an archive from before migration 0017, where re-decided records had merged, the one
    kept could name a node the attempt never ran on; the replay imitated it."""
    from inference.training.archive import eligible
    from scheduling.events import JobLifecycle

    ends = [JobLifecycle(event_id=f"{j}{k}", event_time=_after(2 + k), job_id=j, decision_id=f"d{j}", node_id=node,
                         state=state, exit_code=0 if state == "finished" else None)
            for j, node in (("A", "n0"), ("B", "n2")) for k, state in enumerate(("started", "finished"))]  # fmt: skip
    kept, skipped = eligible(_two_jobs([("dA", "A", 1, "n0"), ("dB", "B", 1, "n0")], ends), ["finished"], None)
    assert [p.decision_id for p in kept] == ["dA"] and skipped == {"started on another node than decided": 1}


@pytest.mark.parametrize("since_s", [6.0, 12.0])
def test_a_window_rebuilds_the_states_the_whole_archive_does_from_its_start(archive, since_s):
    """``train --from-archive --since``: the jobs over before the window are not read (found by review: the
    whole archive was read into memory); the placements still running at its start are, and hold their
    nodes. The demonstrations are those of the whole archive's replay from the window's start on."""
    truths = live_run(ArchiveWriter(archive))
    since = at(since_s)
    whole, window = fold_events(training_events(archive)), fold_events(training_events(archive, since=since))
    t0 = since.timestamp()
    gone = set(whole.jobs) - set(window.jobs)
    assert gone and set(window.jobs) < set(whole.jobs)  # some jobs were over: not read
    for key in gone:  # each finished before the window, or was given up before it
        runs = [p for p in whole.placed if (p.cluster, p.job_id) == key]
        assert whole.jobs[key].submit_time < t0 and all(p.time < t0 and (p.end_time or t0) < t0 for p in runs)
        assert (runs and runs[-1].end_state == "finished") or whole.rejected.get(key, t0) < t0
    before = [p for p in window.placed if p.time < t0]
    assert any(p.end_time is None or p.end_time >= t0 for p in before)  # running at its start: they hold nodes
    got, want = (reconstruct(ev, spec=SPEC, min_feasible=1, outcomes=("finished", "failed"), since=t0)
                 for ev in (window, whole))  # fmt: skip
    assert got.decision_ids == want.decision_ids == [
        t.decision_id for t in truths if t.outcome in ("finished", "failed") and t.time >= t0]
    assert got.skipped["before the window (--since)"] == len(before)
    for name in ("nodes", "pairs", "feasible", "target", "queues"):
        np.testing.assert_array_equal(got.demos.arrays()[name], want.demos.arrays()[name])


def test_a_decisions_job_features_are_those_of_its_steps_start():
    """Found by review: the replay computed a job's features (its time waited) at the decision's event time,
    stamped after the model call, where the worker computes them at the step's tick, which the step's name
    carries (``<cluster>:<n>:<tick>``, streams/loop.py)."""
    from inference.encoders import EncoderCache, get_encoder
    from inference.features.jobs import job_demand
    from inference.features.spec import FeatureSpec
    from inference.training.archive import step_time
    from scheduling.events import step_id_for

    spec = FeatureSpec(gpu_models=(), text_dim=8, encoder="hashed-ngram-8")
    events = _two_jobs([("dA", "A", 1, "n0"), ("dB", "B", 10, "n1")], [])
    events.placed[1].step_id = step_id_for("default", 7, _after(9.2).timestamp())  # (as the worker names it)
    rebuilt = reconstruct(events, spec=spec, min_feasible=1, outcomes=("running",))
    k = rebuilt.decision_ids.index("dB")
    want = job_demand([events.jobs[("default", "B")]], _after(9.2).timestamp(), spec, EncoderCache(get_encoder(spec.encoder)))
    np.testing.assert_allclose(rebuilt.demos.jobs[k], want[0], atol=1e-6)
    assert rebuilt.times[k] == _after(10).timestamp()  # the decision's time still places it for the validation cut
    assert step_time("st1", 5.0) == 5.0 and step_time("a:b:1:4.5", 5.0) == 4.5 and step_time("c:1:x", 5.0) == 5.0
    assert step_time("c:1:1e12", 5.0) == 5.0  # not a tick before the decision


def test_a_retried_job_is_in_its_steps_order_by_its_submission_as_the_worker_orders_it():
    """Found by review: the replay's pending jobs came in the order they came back to the queue, so a retried
    job was last, outside the window it was in (the worker orders FIFO by submission: a retry keeps it)."""
    from inference.encoders import EncoderCache, get_encoder
    from inference.features.jobs import job_demand
    from inference.features.spec import FeatureSpec
    from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry
    from storage.queries.training_events import TrainingEvents

    nodes = [NodeTelemetry(event_id=f"t{i}", event_time=_after(-5), node_id=f"n{i}", source="inventory",
                           cpu_milli=8000, memory_mib=32000) for i in range(3)]  # fmt: skip
    subs = [JobSubmitted(event_id=f"s{j}", event_time=_after(s), job_id=j, cpu_milli=1000, memory_mib=100, name=f"job {j}")
            for j, s in (("A", 1), ("B", 3), ("C", 4))]  # fmt: skip
    decisions = [DecisionRecord(event_id=d, decision_id=d, event_time=_after(s), job_id="A", attempt=a, outcome="placed",
                                node_id="n0", policy="fgd", latency_ms=1, cpu_milli=1000, memory_mib=100, step_id=f"st{s}")
                 for d, a, s in (("dA0", 0, 2), ("dA1", 1, 6))]  # fmt: skip
    ends = [JobLifecycle(event_id="e1", event_time=_after(2.1), job_id="A", state="started", node_id="n0", decision_id="dA0"),
            JobLifecycle(event_id="e2", event_time=_after(5), job_id="A", state="failed", exit_code=1, node_id="n0",
                         decision_id="dA0")]  # fmt: skip
    events = fold_events(TrainingEvents(nodes=nodes, submissions=subs, placed=decisions, placed_partitions=[0, 0],
                                        ends=ends, end_positions=[(0, 0), (0, 1)]))  # fmt: skip
    spec = FeatureSpec(gpu_models=(), text_dim=8, encoder="hashed-ngram-8")
    got = reconstruct(events, spec=spec, min_feasible=1, outcomes=("failed", "running"), window=2)
    k = got.decision_ids.index("dA1")
    a, b = (events.jobs[("default", j)] for j in "AB")
    want = job_demand([a, b], _after(6).timestamp(), spec, EncoderCache(get_encoder(spec.encoder))).mean(axis=0)
    np.testing.assert_allclose(got.demos.queues[k], want, atol=1e-6)  # the window [A, B], not A alone after B, C


def test_an_archive_of_two_clusters_of_different_sizes_trains(tmp_path):
    """Found by review: every state's per-node arrays were stacked into one, and two clusters of 3 and 5 nodes
    failed there with a traceback, after the whole archive had been read and rebuilt. They are padded to the
    largest table now, and a batch (one table) is cut back to its own size."""
    from inference.training.imitation import _Data
    from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry
    from storage.queries.training_events import TrainingEvents

    nodes, subs, placed, ends = [], [], [], []
    for cluster, size in (("a", 3), ("b", 5)):
        nodes += [NodeTelemetry(event_id=f"t-{cluster}{i}", event_time=at(-5), node_id=f"n{i}", cluster=cluster,
                                source="inventory", cpu_milli=8000, memory_mib=32000) for i in range(size)]  # fmt: skip
        for k in range(12):
            j = f"{cluster}-j{k}"
            subs.append(JobSubmitted(event_id=f"s-{j}", event_time=at(k), job_id=j, cluster=cluster, cpu_milli=1000,
                                     memory_mib=100))  # fmt: skip
            placed.append(DecisionRecord(event_id=f"d-{j}", decision_id=f"d-{j}", event_time=at(k + 0.5), job_id=j,
                                         cluster=cluster, outcome="placed", node_id=f"n{k % size}", policy="fgd",
                                         latency_ms=1, cpu_milli=1000, memory_mib=100, step_id=f"{cluster}:{k}:{k}"))  # fmt: skip
            ends += [JobLifecycle(event_id=f"{s}-{j}", event_time=at(k + dt), job_id=j, cluster=cluster, state=s,
                                  exit_code=0 if s == "finished" else None, node_id=f"n{k % size}", decision_id=f"d-{j}")
                     for s, dt in (("started", 0.6), ("finished", 0.9))]  # fmt: skip
    placed.sort(key=lambda d: d.event_time)
    events = fold_events(TrainingEvents(nodes=nodes, submissions=subs, placed=placed, placed_partitions=[0] * len(placed),
                                        ends=ends, end_positions=[(0, i) for i in range(len(ends))]))  # fmt: skip
    demos = reconstruct(events, spec=SPEC, min_feasible=2).demos
    assert sorted({len(n) for n in demos.nodes}) == [3, 5]
    data = _Data(demos, ModelConfig(spec=SPEC))
    for g, idx in data.batches(64, None):  # each table's samples, exactly as recorded
        got = data.at(g, torch.from_numpy(idx))
        for name in ("nodes", "pairs", "feasible", "target"):
            np.testing.assert_array_equal(got[name].numpy(), np.stack([getattr(demos, name)[i] for i in idx]))
    out = train_from_archive(events, tmp_path / "models", options=TrainOptions(epochs=1), min_feasible=2)
    assert (out / "model.pt").exists()


def test_the_validation_cut_puts_a_steps_decisions_on_one_side():
    """Found by review: the worker stamps a step's records one by one, milliseconds apart, and the cut (a
    decision's time) fell between them: decisions made on one state and queue trained and validated."""
    from inference.training.archive import split_times
    from inference.training.archive_events import Placed
    from inference.training.archive_train import validation_cut

    events = ArchiveEvents()
    for step, t0 in (("c:1:100.0", 100.0), ("c:2:101.0", 101.0)):
        for i in range(10):  # ten decisions 4 ms apart, as one step publishes them
            events.placed.append(Placed(decision_id=f"{step}-{i}", job_id=f"{step}-j{i}", cluster="c", attempt=0,
                                        node_id="n0", gpu_indices=(), policy="fgd", model_version="", fallback=False,
                                        step_id=step, time=t0 + 0.004 * i, cpu_milli=1, memory_mib=1,
                                        gpu_milli_per_gpu=0, end_state="finished", end_time=t0 + 5))  # fmt: skip
    cut = validation_cut(events, ["finished"], None, 0.15)
    split = split_times(events)
    sides = {(p.step_id, split[(p.cluster, p.decision_id)] >= cut) for p in events.placed}
    assert cut == 101.0 and sides == {("c:1:100.0", False), ("c:2:101.0", True)}
