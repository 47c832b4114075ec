-- The decisions as the worker applied them: the first record of each decision id in the topic. A
-- worker that re-decides the same attempt after a restart (the same decision id, perhaps another node)
-- publishes a second record; the worker applies the first it reads back and the agents execute the
-- first command, so the second changed nothing. `decisions FINAL` keeps the LATEST record per id (its
-- version column is event_time): `explain`, the metrics and retraining would name the node that was
-- never used. Every analytics read of decisions goes through this view (reconciliation reads the raw
-- table: it counts the records).
CREATE VIEW IF NOT EXISTS decisions_applied AS
SELECT * FROM decisions
ORDER BY decision_id, kafka_partition, kafka_offset
LIMIT 1 BY decision_id;
