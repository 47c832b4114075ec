-- The scheduling step that decided: per-step compute time is counted once per step.
ALTER TABLE decisions ADD COLUMN IF NOT EXISTS step_id String DEFAULT '' AFTER fallback;
