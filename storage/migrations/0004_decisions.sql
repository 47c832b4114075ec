-- The decision record (topic decisions): one row per placement or rejection.
-- event_id equals decision_id (deterministic per job attempt), so a worker that re-decides
-- the same attempt after a restart collapses onto one row. The sorting key therefore has
-- no event_time and the table is not partitioned by time: two versions of one decision
-- may carry different event_times and must still meet in the same part on merge.
-- The version column is event_time: the latest decision for an event_id wins.
CREATE TABLE IF NOT EXISTS decisions
(
    event_id             String,
    event_time           DateTime64(3, 'UTC'),
    schema_version       UInt8,
    decision_id          String,
    job_id               String,
    cluster              LowCardinality(String),
    attempt              UInt16,
    outcome              LowCardinality(String),
    node_id              LowCardinality(Nullable(String)),
    gpu_indices          Array(UInt8),
    policy               LowCardinality(String),
    model_version        LowCardinality(String),
    candidates           Array(Tuple(node_id String, score Float64)),
    feasible_nodes       UInt32,
    predicted_duration_s Nullable(Float64),
    predicted_cost       Nullable(Float64),
    latency_ms           Float64,
    step_compute_ms      Float64,
    submit_time          Nullable(DateTime64(3, 'UTC')),
    reason               String,
    cpu_milli            UInt32,
    memory_mib           UInt32,
    gpu_milli_per_gpu    UInt16,
    trace_duration_s     Nullable(Float64),
    fallback             Bool,
    kafka_partition      Int32,
    kafka_offset         Int64,
    archived_at          DateTime64(3, 'UTC'),
    CONSTRAINT outcome_known CHECK outcome IN ('placed', 'rejected')
)
ENGINE = ReplacingMergeTree(event_time)
ORDER BY (cluster, job_id, event_id);
