-- The learned cost estimator's second column: the job's expected run time on the chosen node, s,
-- trained on recorded run times at nominal node speed (its expected completion time is the
-- decision's time plus this). NULL for heuristics and for
-- models whose ψ has the fragmentation column only.
ALTER TABLE decisions ADD COLUMN IF NOT EXISTS predicted_run_time_s Nullable(Float64) AFTER predicted_cost;
