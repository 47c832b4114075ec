-- Every copy of an event at its own Kafka position is its own row. The three event tables were
-- ReplacingMergeTree keyed by event id: a merge (or one insert holding both) kept the copy archived
-- LAST of an event sent twice, so 0020's views, which pick the first copy the worker did not refuse,
-- found it only while the copies sat in separate parts (found by review: after OPTIMIZE ... FINAL an
-- accepted submission whose later copy was refused vanished again, and reconciliation saw a resent
-- `failed` after the retry's start). As 0017 did for decisions: a new table whose sorting key ends in
-- the position (an archiver's redelivery of one position still collapses), the old rows copied as
-- they are (copies not merged away yet come along with their own positions), the old table renamed
-- out of the way and the new one into its name, what an archiver wrote to the old one meanwhile copied
-- again, the old one dropped. 0020's views name the tables, so they read the new ones (checked on a
-- populated archive: the same counts through every view). Each statement is safe to repeat:
-- a copy's repeat collapses onto the same keys, and the renames do nothing once done. Two workers must
-- not run it at once: upgrade one worker first (README, "The archive"). Raw reads of these tables now
-- see each copy: read them through the *_accepted views (one row per event) unless copies are what
-- you count.
CREATE TABLE IF NOT EXISTS jobs_submitted_by_copy AS jobs_submitted
ENGINE = ReplacingMergeTree(archived_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (cluster, job_id, event_id, kafka_partition, kafka_offset);

INSERT INTO jobs_submitted_by_copy SELECT * FROM jobs_submitted;

RENAME TABLE IF EXISTS jobs_submitted TO jobs_submitted_0001;

RENAME TABLE IF EXISTS jobs_submitted_by_copy TO jobs_submitted;

INSERT INTO jobs_submitted SELECT * FROM jobs_submitted_0001
WHERE (kafka_partition, kafka_offset) NOT IN (SELECT kafka_partition, kafka_offset FROM jobs_submitted);

DROP TABLE IF EXISTS jobs_submitted_0001;

CREATE TABLE IF NOT EXISTS nodes_telemetry_by_copy AS nodes_telemetry
ENGINE = ReplacingMergeTree(archived_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (cluster, node_id, event_time, event_id, kafka_partition, kafka_offset);

INSERT INTO nodes_telemetry_by_copy SELECT * FROM nodes_telemetry;

RENAME TABLE IF EXISTS nodes_telemetry TO nodes_telemetry_0002;

RENAME TABLE IF EXISTS nodes_telemetry_by_copy TO nodes_telemetry;

INSERT INTO nodes_telemetry SELECT * FROM nodes_telemetry_0002
WHERE (kafka_partition, kafka_offset) NOT IN (SELECT kafka_partition, kafka_offset FROM nodes_telemetry);

DROP TABLE IF EXISTS nodes_telemetry_0002;

CREATE TABLE IF NOT EXISTS jobs_lifecycle_by_copy AS jobs_lifecycle
ENGINE = ReplacingMergeTree(archived_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (cluster, job_id, event_time, event_id, kafka_partition, kafka_offset);

INSERT INTO jobs_lifecycle_by_copy SELECT * FROM jobs_lifecycle;

RENAME TABLE IF EXISTS jobs_lifecycle TO jobs_lifecycle_0003;

RENAME TABLE IF EXISTS jobs_lifecycle_by_copy TO jobs_lifecycle;

INSERT INTO jobs_lifecycle SELECT * FROM jobs_lifecycle_0003
WHERE (kafka_partition, kafka_offset) NOT IN (SELECT kafka_partition, kafka_offset FROM jobs_lifecycle);

DROP TABLE IF EXISTS jobs_lifecycle_0003;
