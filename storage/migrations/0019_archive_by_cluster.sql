-- The applied views keyed by cluster as well. A job id is unique only among the clusters one worker
-- serves (README, "Ids"): two clusters on two workers may both have a job "job1", and its decision
-- id (decision_id_for(job_id, attempt)) is then the same in both. 0017's decisions_applied kept one
-- row per decision id, so one cluster's decision hid the other's; 0018's jobs_lifecycle_applied took
-- where an attempt runs per (job id, attempt), so the reports of the other cluster's job of that id
-- were dropped as "not where it runs" (found by review). Both now key by (cluster, ...), as the
-- tables do. Each statement replaces its view: safe to repeat.
CREATE OR REPLACE VIEW decisions_applied AS
SELECT * FROM decisions
ORDER BY cluster, decision_id, kafka_partition, kafka_offset
LIMIT 1 BY cluster, decision_id;

CREATE OR REPLACE VIEW jobs_lifecycle_applied AS
SELECT l.* FROM jobs_lifecycle_accepted AS l
LEFT JOIN (
    SELECT cluster, job_id, attempt, argMin(assumeNotNull(node_id), (kafka_partition, kafka_offset)) AS ran_on,
           min((kafka_partition, kafka_offset)) AS first_at
    FROM jobs_lifecycle_accepted
    WHERE state = 'started' AND ifNull(node_id, '') != ''
    GROUP BY cluster, job_id, attempt
) AS s ON l.cluster = s.cluster AND l.job_id = s.job_id AND l.attempt = s.attempt
WHERE ifNull(l.node_id, '') = '' OR ifNull(s.ran_on, '') = '' OR l.node_id = s.ran_on
   OR (l.kafka_partition, l.kafka_offset) < s.first_at;
