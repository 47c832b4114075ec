-- The lifecycle reports as the worker applied them: those of the node each attempt runs on. A worker
-- that re-decided an attempt after a restart (the same decision id, another node) can have its
-- command executed twice; the first `started` of the attempt says where it runs, the worker fences
-- the other run and ignores that node's reports (streams/state.py: "started on a second node",
-- "not where it runs"). Read raw, those reports moved the job back to the queue in `explain` while it
-- ran, counted a reversal in the stability metric, shortened its run time and ended its GPU holding
-- early (found by review). Reports without a node (the worker's own timeouts), of attempts that
-- never started, and those before the attempt's first `started` (the worker applies an end from any
-- node while the job is only reserved) are kept. Every analytics read of the lifecycle goes through
-- this view (reconciliation reads the accepted reports: it checks them).
CREATE VIEW IF NOT EXISTS jobs_lifecycle_applied AS
SELECT l.* FROM jobs_lifecycle_accepted AS l
LEFT JOIN (
    SELECT job_id, attempt, argMin(assumeNotNull(node_id), (kafka_partition, kafka_offset)) AS ran_on,
           min((kafka_partition, kafka_offset)) AS first_at
    FROM jobs_lifecycle_accepted
    WHERE state = 'started' AND ifNull(node_id, '') != ''
    GROUP BY job_id, attempt
) AS s ON l.job_id = s.job_id AND l.attempt = s.attempt
WHERE ifNull(l.node_id, '') = '' OR ifNull(s.ran_on, '') = '' OR l.node_id = s.ran_on
   OR (l.kafka_partition, l.kafka_offset) < s.first_at;
