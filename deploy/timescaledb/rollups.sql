-- Long-term rollups of the telemetry: TimescaleDB continuous aggregates, with their refresh,
-- compression and retention policies.
--
-- Raw telemetry is kept for days (deploy/fabricmon.yaml, database.retention); these hourly and
-- daily rollups keep a year or two of it for capacity planning and trend questions ("which
-- links flapped most this quarter?"). Continuous aggregates need the community license, which the
-- official timescale/timescaledb image carries: on an Apache-only build this script changes
-- nothing and says so. Nothing in fabricmon depends on these views (the Grafana dashboard reads
-- the raw tables too), so skipping them is harmless.
--
-- docker-compose.yml runs it with psql (the `rollups` service) after `fabricmon migrate`, on
-- every start: every statement is idempotent. Run it by hand with
--   psql "$DSN" -v ON_ERROR_STOP=1 -f deploy/timescaledb/rollups.sql

\set ON_ERROR_STOP on
SELECT CASE WHEN current_setting('timescaledb.license', true) = 'timescale' THEN 'true' ELSE 'false' END
       AS community_license \gset

\if :community_license

CREATE MATERIALIZED VIEW IF NOT EXISTS port_counters_1h
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT time_bucket(INTERVAL '1 hour', time) AS bucket,
       switch,
       port,
       count(*) AS samples,
       count(*) FILTER (WHERE oper_status = 1) AS samples_up,
       min(speed_bps) AS speed_bps_min,
       max(speed_bps) AS speed_bps_max,
       avg(in_bps) AS in_bps_avg,
       max(in_bps) AS in_bps_max,
       avg(out_bps) AS out_bps_avg,
       max(out_bps) AS out_bps_max,
       sum(in_errors_ps * interval_s) AS in_errors,
       sum(out_errors_ps * interval_s) AS out_errors,
       sum(in_discards_ps * interval_s) AS in_discards,
       sum(out_discards_ps * interval_s) AS out_discards,
       sum(in_fcs_errors_ps * interval_s) AS in_fcs_errors
FROM port_counters
GROUP BY bucket, switch, port
WITH NO DATA;

CREATE MATERIALIZED VIEW IF NOT EXISTS pfc_counters_1h
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT time_bucket(INTERVAL '1 hour', time) AS bucket,
       switch,
       port,
       priority,
       -- rows are stored on change (collector/counters.py): the hour's mean is its pauses / 3600 s
       sum(rx_pause_pps * interval_s) / 3600 AS rx_pause_pps_avg,
       max(rx_pause_pps) AS rx_pause_pps_max,
       sum(tx_pause_pps * interval_s) / 3600 AS tx_pause_pps_avg,
       max(tx_pause_pps) AS tx_pause_pps_max,
       sum(rx_pause_pps * interval_s) AS rx_pause_frames,
       sum(tx_pause_pps * interval_s) AS tx_pause_frames
FROM pfc_counters
GROUP BY bucket, switch, port, priority
WITH NO DATA;

CREATE MATERIALIZED VIEW IF NOT EXISTS link_events_1d
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT time_bucket(INTERVAL '1 day', time) AS bucket,
       switch,
       port,
       sum(flaps) FILTER (WHERE new_status IN ('down', 'flap')) AS flaps,
       count(*) FILTER (WHERE new_status = 'up') AS recoveries,
       sum(down_s) AS down_s,
       max(down_s) AS longest_down_s
FROM link_events
GROUP BY bucket, switch, port
WITH NO DATA;

CREATE MATERIALIZED VIEW IF NOT EXISTS oversubscription_1h
WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
SELECT time_bucket(INTERVAL '1 hour', time) AS bucket,
       scope,
       name,
       avg(ratio) AS ratio_avg,
       max(ratio) AS ratio_max,
       count(*) FILTER (WHERE ratio IS NULL) AS evaluations_without_uplink,
       min(up_gbps) AS up_gbps_min,
       max(design_ratio) AS design_ratio
FROM oversubscription
GROUP BY bucket, scope, name
WITH NO DATA;

-- Refresh the recent past every half hour; compress what is a week old; keep the rollups far
-- longer than the raw data (the refresh window stays well inside the raw retention, so dropping
-- raw chunks never erases rolled-up history).
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT * FROM (VALUES
            ('port_counters_1h',    INTERVAL '1 day',  INTERVAL '1 hour', INTERVAL '7 days',  INTERVAL '400 days'),
            ('pfc_counters_1h',     INTERVAL '1 day',  INTERVAL '1 hour', INTERVAL '7 days',  INTERVAL '400 days'),
            ('link_events_1d',      INTERVAL '7 days', INTERVAL '1 hour', INTERVAL '30 days', INTERVAL '730 days'),
            ('oversubscription_1h', INTERVAL '1 day',  INTERVAL '1 hour', INTERVAL '7 days',  INTERVAL '400 days')
        ) AS v (view_name, start_offset, end_offset, compress_after, keep)
    LOOP
        PERFORM add_continuous_aggregate_policy(
            r.view_name::regclass,
            start_offset => r.start_offset,
            end_offset => r.end_offset,
            schedule_interval => INTERVAL '30 minutes',
            if_not_exists => true
        );
        IF NOT (SELECT compression_enabled FROM timescaledb_information.continuous_aggregates
                WHERE view_schema = current_schema() AND view_name = r.view_name) THEN
            EXECUTE format('ALTER MATERIALIZED VIEW %I SET (timescaledb.compress = true)', r.view_name);
        END IF;
        PERFORM add_compression_policy(r.view_name::regclass, compress_after => r.compress_after, if_not_exists => true);
        PERFORM add_retention_policy(r.view_name::regclass, drop_after => r.keep, if_not_exists => true);
    END LOOP;
END
$$;

\echo 'fabricmon rollups: continuous aggregates and their policies are in place'

\else
\echo 'fabricmon rollups: this TimescaleDB build has no community license (Apache-only): no continuous aggregates, nothing changed'
\endif
