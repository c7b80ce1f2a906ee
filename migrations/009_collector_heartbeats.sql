-- The collectors' own health, so the analyzer can tell a monitoring failure from a fabric
-- failure: a collector that is stopped, wedged or replaying its spool makes every switch it
-- collects look silent, which must not read as every switch failing (analyzer/collection.py).
-- One row per collector process and shard, upserted every max(1 s, min(5 s, interval/2)) by
-- store/heartbeats.py. Times are the collector's wall clock, the clock its samples are stamped in.

CREATE TABLE collector_heartbeats (
    collector     text PRIMARY KEY,                 -- '<hostname>:<pid>', plus '/shard-I-of-N' when sharded
    shard         text,                             -- 'I/N', NULL when this process collects every target
    started_at    timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    watermark     timestamptz,                      -- newest port_counters sample time COMMITTED; NULL: none yet
    backlog_rows  bigint NOT NULL DEFAULT 0 CHECK (backlog_rows >= 0),  -- writer buffers + spool, not yet written
    spool_rows    bigint NOT NULL DEFAULT 0 CHECK (spool_rows >= 0),    -- of those, on disk
    replaying     boolean NOT NULL DEFAULT false,   -- the spool holds rows from a database outage, replayed first
    switches      text[] NOT NULL DEFAULT '{}',     -- the switches this process/shard is assigned
    interval_s    double precision NOT NULL,        -- its sampling interval (the slowest of its protocols)
    resumed_at    timestamptz NOT NULL,             -- started_at, or when it last came back from a stall (frozen, or
                                                    -- committing again after a pause): its switches need a moment to
                                                    -- report again, and until then their silence is not theirs
    stopped_at    timestamptz                       -- set on a clean shutdown: a graceful stop is not a silent collector
);
