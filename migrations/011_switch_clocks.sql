-- Device clocks as the collectors see them (SPEC §9.2): a switch whose timestamps are further than
-- collector.max_clock_skew_s from receive time has them replaced (collector/clock.py). One row per
-- switch, upserted with every collector heartbeat by store/clocks.py; /v1/switches reads it.

CREATE TABLE switch_clocks (
    switch      text PRIMARY KEY,
    collector   text NOT NULL,               -- the collector_heartbeats.collector that reported it
    skew_s      double precision NOT NULL,   -- the switch's clock minus receive time (positive: ahead)
    corrected   boolean NOT NULL,            -- its timestamps are being replaced now
    replaced    bigint NOT NULL DEFAULT 0 CHECK (replaced >= 0),  -- readings replaced since that collector started
    updated_at  timestamptz NOT NULL         -- the heartbeat that wrote it (the collector's clock)
);
