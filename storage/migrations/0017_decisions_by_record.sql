-- One row per decision RECORD, not per decision id. A re-decided attempt (the worker re-decides
-- under the same decision id after a refused delivery or a restart; event_id = decision_id) is a
-- second record, and 0004's table (ORDER BY (cluster, job_id, event_id), version event_time)
-- kept only the latest of the two once its parts merged, or at insert when both came in one
-- batch: decisions_applied (0016), which takes the first record the worker applied, then named
-- the node that was never used (found by review). The new table keeps every record apart by its
-- position in the topic; a redelivery of one record (the same partition and offset) still
-- collapses. The rows of the old table are copied as they are (the first records not merged away
-- yet come along); it is then renamed out of the way, the new one into its name, what an archiver
-- wrote to the old one meanwhile copied again, and the old one dropped. Each statement is safe to
-- repeat: a copy's repeat collapses onto the same keys, and the renames do nothing once done. Two
-- workers must not run it at once: upgrade one worker first (README, "The archive").
CREATE TABLE IF NOT EXISTS decisions_by_record AS decisions
ENGINE = ReplacingMergeTree(archived_at)
ORDER BY (cluster, job_id, event_id, kafka_partition, kafka_offset);

INSERT INTO decisions_by_record SELECT * FROM decisions;

RENAME TABLE IF EXISTS decisions TO decisions_0004;

RENAME TABLE IF EXISTS decisions_by_record TO decisions;

INSERT INTO decisions SELECT * FROM decisions_0004
WHERE (kafka_partition, kafka_offset) NOT IN (SELECT kafka_partition, kafka_offset FROM decisions);

DROP TABLE IF EXISTS decisions_0004;

CREATE OR REPLACE VIEW decisions_applied AS
SELECT * FROM decisions
ORDER BY decision_id, kafka_partition, kafka_offset
LIMIT 1 BY decision_id;
