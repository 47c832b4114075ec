-- What happened to placed jobs (topic jobs.lifecycle): started / finished / failed /
-- preempted from agents, timed_out / rejected (with a reason) from the worker.
CREATE TABLE IF NOT EXISTS jobs_lifecycle
(
    event_id        String,
    event_time      DateTime64(3, 'UTC'),
    schema_version  UInt8,
    job_id          String,
    cluster         LowCardinality(String),
    state           LowCardinality(String),
    attempt         UInt16,
    decision_id     Nullable(String),
    node_id         LowCardinality(Nullable(String)),
    exit_code       Nullable(Int32),
    reason          String,
    log_tail        String CODEC(ZSTD(3)),
    kafka_partition Int32,
    kafka_offset    Int64,
    archived_at     DateTime64(3, 'UTC'),
    CONSTRAINT state_known CHECK state IN ('started', 'finished', 'failed', 'preempted', 'timed_out', 'rejected')
)
ENGINE = ReplacingMergeTree(archived_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (cluster, job_id, event_time, event_id);
