-- Oversubscription as a series: every evaluation stores each leaf and spine's live down:up
-- capacity, and the roll-ups per rail, per group and fabric-wide, so one can see when drift began.

CREATE TABLE oversubscription (
    time          timestamptz NOT NULL,
    scope         text NOT NULL CHECK (scope IN ('switch', 'rail', 'group', 'fabric')),
    name          text NOT NULL,
    down_gbps     double precision NOT NULL,
    up_gbps       double precision NOT NULL,
    ratio         double precision,          -- NULL when nothing is up (infinite)
    design_ratio  double precision NOT NULL,
    PRIMARY KEY (scope, name, time)
);
SELECT create_hypertable('oversubscription', 'time', chunk_time_interval => interval '1 day');

-- Each evaluation's verdict, for /v1/health and `fabricmon check` without re-running the checks.
CREATE TABLE analyzer_runs (
    time        timestamptz NOT NULL PRIMARY KEY,
    status      text NOT NULL CHECK (status IN ('healthy', 'degraded', 'critical')),
    duration_s  double precision NOT NULL,
    findings    integer NOT NULL,
    report      jsonb NOT NULL
);
SELECT create_hypertable('analyzer_runs', 'time', chunk_time_interval => interval '1 day');
