-- Job submissions (topic jobs.submitted). One row per event; redeliveries collapse on
-- event_id (ReplacingMergeTree, the sorting key ends in event_id). Read with FINAL.
CREATE TABLE IF NOT EXISTS jobs_submitted
(
    event_id               String,
    event_time             DateTime64(3, 'UTC'),
    schema_version         UInt8,
    job_id                 String,
    cluster                LowCardinality(String),
    tenant                 LowCardinality(String),
    user                   LowCardinality(String),
    priority               Int32,
    qos                    LowCardinality(String),
    cpu_milli              UInt32,
    memory_mib             UInt32,
    num_gpu                UInt8,
    gpu_milli              UInt16,
    gpu_models             Array(LowCardinality(String)),
    gang_id                Nullable(String),
    gang_size              UInt16,
    dag_parents            Array(String),
    app                    LowCardinality(Nullable(String)),
    max_instances_per_node Nullable(UInt32),
    name                   String,
    command                String CODEC(ZSTD(3)),
    labels                 Map(LowCardinality(String), String),
    runtime_estimate_s     Nullable(Float64),
    trace_duration_s       Nullable(Float64),
    kafka_partition        Int32,
    kafka_offset           Int64,
    archived_at            DateTime64(3, 'UTC'),
    CONSTRAINT qos_known CHECK qos IN ('LS', 'BE', 'Burstable', 'Guaranteed')
)
ENGINE = ReplacingMergeTree(archived_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (cluster, job_id, event_id);
