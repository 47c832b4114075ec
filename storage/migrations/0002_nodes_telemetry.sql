-- Node capacity and state (topic nodes.telemetry), from inventory replay or agents.
CREATE TABLE IF NOT EXISTS nodes_telemetry
(
    event_id         String,
    event_time       DateTime64(3, 'UTC'),
    schema_version   UInt8,
    node_id          LowCardinality(String),
    cluster          LowCardinality(String),
    source           LowCardinality(String),
    cpu_milli        UInt32,
    memory_mib       UInt32,
    num_gpu          UInt8,
    gpu_model        LowCardinality(Nullable(String)),
    cpu_alloc_milli  UInt32,
    memory_alloc_mib UInt32,
    gpu_alloc_milli  Array(UInt16),
    cpu_util         Float32,
    gpu_util         Float32,
    healthy          Bool,
    topology         Map(LowCardinality(String), String),
    kafka_partition  Int32,
    kafka_offset     Int64,
    archived_at      DateTime64(3, 'UTC'),
    CONSTRAINT source_known CHECK source IN ('inventory', 'agent')
)
ENGINE = ReplacingMergeTree(archived_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (cluster, node_id, event_time, event_id);
