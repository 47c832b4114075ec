-- A preemption can name the one placement it ends (fencing a superseded attempt).
ALTER TABLE actions ADD COLUMN IF NOT EXISTS target_decision_id Nullable(String) AFTER checkpoint_uri;
