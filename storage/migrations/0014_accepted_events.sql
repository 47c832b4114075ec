-- The events the worker accepted. An event the worker refused on its own state (a clock far ahead
-- of its own, a job id already in use, a node id another cluster's) is archived like any other (the
-- archiver admits on the message alone, streams/admission.py), and its dead letter names it (topic,
-- partition, offset). Every analytics read (metrics, summary, dashboards, explain, retraining) goes
-- through these views, so such an event counts nowhere as accepted. Not the events dead-lettered for
-- an internal error: the worker applies them again (streams/log_restore.py). One row per event
-- (FINAL), as the reads had before.
CREATE VIEW IF NOT EXISTS jobs_submitted_accepted AS
SELECT * FROM jobs_submitted FINAL
WHERE (kafka_partition, kafka_offset) NOT IN
      (SELECT topic_partition, topic_offset FROM deadletter
       WHERE topic = 'jobs.submitted' AND NOT startsWith(reason, 'internal error'));

CREATE VIEW IF NOT EXISTS nodes_telemetry_accepted AS
SELECT * FROM nodes_telemetry FINAL
WHERE (kafka_partition, kafka_offset) NOT IN
      (SELECT topic_partition, topic_offset FROM deadletter
       WHERE topic = 'nodes.telemetry' AND NOT startsWith(reason, 'internal error'));

CREATE VIEW IF NOT EXISTS jobs_lifecycle_accepted AS
SELECT * FROM jobs_lifecycle FINAL
WHERE (kafka_partition, kafka_offset) NOT IN
      (SELECT topic_partition, topic_offset FROM deadletter
       WHERE topic = 'jobs.lifecycle' AND NOT startsWith(reason, 'internal error'));
