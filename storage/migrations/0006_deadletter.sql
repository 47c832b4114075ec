-- Dead letters (topic deadletter): the original message bytes (String holds raw bytes),
-- where it came from and why it was refused. topic_partition / topic_offset are the
-- position of the ORIGINAL message; kafka_partition / kafka_offset that of the dead letter.
CREATE TABLE IF NOT EXISTS deadletter
(
    event_id        String,
    event_time      DateTime64(3, 'UTC'),
    schema_version  UInt8,
    topic           LowCardinality(String),
    topic_partition Int32,
    topic_offset    Int64,
    message_key     Nullable(String),
    original        String CODEC(ZSTD(3)),
    original_size   UInt32,
    reason          String,
    kafka_partition Int32,
    kafka_offset    Int64,
    archived_at     DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(archived_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (topic, event_time, event_id);
