-- The worker also records why a job is still pending (outcome 'unschedulable', written
-- when the reason changes); 0004's CHECK knew only 'placed' and 'rejected'.
ALTER TABLE decisions DROP CONSTRAINT outcome_known;
ALTER TABLE decisions ADD CONSTRAINT outcome_known CHECK outcome IN ('placed', 'rejected', 'unschedulable');
