-- Commands for agents (topic actions): kind + the common fields; the fields only some
-- kinds carry are Nullable (NULL = not part of that command kind).
CREATE TABLE IF NOT EXISTS actions
(
    event_id          String,
    event_time        DateTime64(3, 'UTC'),
    schema_version    UInt8,
    kind              LowCardinality(String),
    decision_id       String,
    cluster           LowCardinality(String),
    node_id           LowCardinality(String),
    reason            String,
    job_id            Nullable(String),
    attempt           Nullable(UInt16),
    gpu_indices       Array(UInt8),
    cpu_milli         Nullable(UInt32),
    memory_mib        Nullable(UInt32),
    gpu_milli_per_gpu Nullable(UInt16),
    policy            LowCardinality(Nullable(String)),
    model_version     LowCardinality(Nullable(String)),
    trace_duration_s  Nullable(Float64),
    checkpoint_uri    Nullable(String),
    kafka_partition   Int32,
    kafka_offset      Int64,
    archived_at       DateTime64(3, 'UTC'),
    CONSTRAINT kind_known CHECK kind IN ('place', 'preempt', 'isolate_node', 'restart_from_checkpoint')
)
ENGINE = ReplacingMergeTree(archived_at)
ORDER BY (cluster, decision_id, event_id);
