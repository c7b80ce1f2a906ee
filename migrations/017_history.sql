-- The dashboard's history (issue 15): each evaluation's rail figures and SLO budgets as series,
-- small rows beside analyzer_runs (whose report is too big to scan for a 24 h chart).

CREATE TABLE rail_history (
    time                 timestamptz NOT NULL,
    rail                 integer NOT NULL,
    design_gbps          double precision NOT NULL,
    live_gbps            double precision,
    bottleneck_fraction  double precision,
    load_gbps            double precision,
    PRIMARY KEY (rail, time)
);
SELECT create_hypertable('rail_history', 'time', chunk_time_interval => interval '1 day');

CREATE TABLE slo_history (
    time              timestamptz NOT NULL,
    objective         text NOT NULL,
    current           double precision NOT NULL,
    target            double precision NOT NULL,
    budget_remaining  double precision NOT NULL,
    PRIMARY KEY (objective, time)
);
SELECT create_hypertable('slo_history', 'time', chunk_time_interval => interval '1 day');

-- The worst leaf or spine's down:up ratio of each verdict ('Infinity' when one has every uplink
-- down), for the overview's "worst switch" line.
ALTER TABLE analyzer_runs ADD COLUMN worst_ratio double precision, ADD COLUMN worst_switch text;

-- An incident's view lists its deliveries.
CREATE INDEX webhook_deliveries_alert ON webhook_deliveries (alert_id, seq);
