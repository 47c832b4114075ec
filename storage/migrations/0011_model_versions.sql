-- The learned scorer's model registry (issue 4): one row per model version with where it
-- came from, its training metrics and its evaluation on the held-out replay beside the
-- serving version's, and the promotion decision. A status change (candidate → promoted or
-- rejected) is a new row with a higher revision; ReplacingMergeTree(revision) keeps the
-- latest per version. config, train_metrics and evaluation are JSON text (JSONExtract* reads
-- them). Read with FINAL.
CREATE TABLE IF NOT EXISTS model_versions
(
    version         String,
    created_at      DateTime64(3, 'UTC'),
    parent_version  String,
    source          LowCardinality(String),
    expert          LowCardinality(String),
    path            String,
    config          String CODEC(ZSTD(3)),
    train_metrics   String CODEC(ZSTD(3)),
    evaluation      String CODEC(ZSTD(3)),
    primary_metric  LowCardinality(String),
    candidate_score Nullable(Float64),
    serving_score   Nullable(Float64),
    status          LowCardinality(String),
    reason          String,
    decided_at      Nullable(DateTime64(3, 'UTC')),
    revision        UInt64,
    CONSTRAINT source_known CHECK source IN ('simulator', 'archive'),
    CONSTRAINT status_known CHECK status IN ('candidate', 'promoted', 'rejected')
)
ENGINE = ReplacingMergeTree(revision)
ORDER BY version;
