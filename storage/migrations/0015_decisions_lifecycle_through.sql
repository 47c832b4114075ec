-- The state a placement's step saw: the offset after the last jobs.lifecycle event of the cluster's
-- partition the worker had applied when the step took its snapshot. A report below it had freed its
-- resources in that snapshot; one at or above it had not, whatever its event time (under load the worker
-- applies reports seconds after their agents sent them). `semsched train --from-archive` rebuilds each
-- decision's state with it. NULL: decisions archived before this column.
ALTER TABLE decisions ADD COLUMN IF NOT EXISTS lifecycle_through Nullable(UInt64) AFTER step_id;
