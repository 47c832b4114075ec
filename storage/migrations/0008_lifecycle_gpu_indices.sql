-- Agents report the GPUs a placement holds on its lifecycle events (a report can overtake
-- the worker's decision and then stands for it).
ALTER TABLE jobs_lifecycle ADD COLUMN IF NOT EXISTS gpu_indices Array(UInt8) AFTER node_id;
