-- Every copy of an event at its own Kafka offset is its own row. The tables are ReplacingMergeTree
-- keyed by event id: a merge (or one insert holding both) kept the copy archived LAST of an event sent
-- twice, so the views of 0020, which pick the first copy the worker did not refuse, found it only while
-- the copies sat in separate parts (found by review: after OPTIMIZE ... FINAL an accepted submission
-- whose later copy was refused vanished again, and reconciliation saw a resent `failed` after the
-- retry's start). The sorting key now ends in `copy_offset`, the copy's Kafka offset (ClickHouse adds
-- only columns added by the same ALTER to a sorting key, so the offset is written twice: the writer
-- fills both). An archiver's redelivery of one offset still collapses to one row. Not the partition: a
-- cluster's events are archived from its own partition only (a message on another is refused before
-- the archive). Rows archived before this have copy_offset 0 and collapse as before; what merges
-- dropped then is gone. Raw reads of these tables now see each copy: read them through the
-- *_accepted views (one row per event) unless copies are what you count. Safe to repeat (IF NOT
-- EXISTS; the key is then unchanged).
ALTER TABLE jobs_submitted ADD COLUMN IF NOT EXISTS copy_offset Int64 AFTER kafka_offset,
    MODIFY ORDER BY (cluster, job_id, event_id, copy_offset);

ALTER TABLE nodes_telemetry ADD COLUMN IF NOT EXISTS copy_offset Int64 AFTER kafka_offset,
    MODIFY ORDER BY (cluster, node_id, event_time, event_id, copy_offset);

ALTER TABLE jobs_lifecycle ADD COLUMN IF NOT EXISTS copy_offset Int64 AFTER kafka_offset,
    MODIFY ORDER BY (cluster, job_id, event_time, event_id, copy_offset);
