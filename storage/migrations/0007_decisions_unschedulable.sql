-- The worker also records why a job is still pending (outcome 'unschedulable', written
-- when the reason changes); 0004's CHECK knew only 'placed' and 'rejected'.
-- IF [NOT] EXISTS: a process that died between a statement and its record runs it again
-- (written without them first: storage/migrate.py REWRITTEN accepts those archives' records).
ALTER TABLE decisions DROP CONSTRAINT IF EXISTS outcome_known;
ALTER TABLE decisions ADD CONSTRAINT IF NOT EXISTS outcome_known CHECK outcome IN ('placed', 'rejected', 'unschedulable');
