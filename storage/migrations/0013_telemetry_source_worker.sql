-- The worker marks a node whose agent fell silent unhealthy with a report of its own (source
-- 'worker', streams/silent_nodes.py); 0002's CHECK knew only 'inventory' and 'agent'.
ALTER TABLE nodes_telemetry DROP CONSTRAINT IF EXISTS source_known;
ALTER TABLE nodes_telemetry ADD CONSTRAINT IF NOT EXISTS source_known CHECK source IN ('inventory', 'agent', 'worker');
