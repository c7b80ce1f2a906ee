-- Telemetry hypertables. One wide row per (switch, port, time). Raw counters are unsigned
-- 64-bit on the wire; they are stored as bigint holding the same 64 bits (values past 2^63
-- appear negative, which takes years at 400G). Rates are computed once, at ingest, by the
-- collector (it alone knows about resets), and stored beside the counters: read rates, not
-- counter differences. The primary keys include time, so the same sample written twice is
-- stored once.

CREATE TABLE port_counters (
    time                 timestamptz NOT NULL,
    switch               text NOT NULL,
    port                 text NOT NULL,
    oper_status          smallint,          -- IF-MIB ifOperStatus: 1 up, 2 down, ...
    speed_bps            bigint,
    in_octets            bigint,
    out_octets           bigint,
    in_unicast_pkts      bigint,
    out_unicast_pkts     bigint,
    in_multicast_pkts    bigint,
    out_multicast_pkts   bigint,
    in_broadcast_pkts    bigint,
    out_broadcast_pkts   bigint,
    in_errors            bigint,
    out_errors           bigint,
    in_discards          bigint,
    out_discards         bigint,
    in_fcs_errors        bigint,
    carrier_transitions  bigint,
    in_pause_frames      bigint,
    out_pause_frames     bigint,
    interval_s           real,              -- seconds since the previous sample used for the rates
    in_bps               double precision,
    out_bps              double precision,
    in_pps               double precision,
    out_pps              double precision,
    in_errors_ps         double precision,
    out_errors_ps        double precision,
    in_discards_ps       double precision,
    out_discards_ps      double precision,
    in_fcs_errors_ps     double precision,
    counter_reset        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (switch, port, time)
);
SELECT create_hypertable('port_counters', 'time', chunk_time_interval => interval '1 hour');
CREATE INDEX port_counters_time ON port_counters (time DESC);

CREATE TABLE pfc_counters (
    time            timestamptz NOT NULL,
    switch          text NOT NULL,
    port            text NOT NULL,
    priority        smallint NOT NULL CHECK (priority BETWEEN -1 AND 7),  -- -1: all priorities (IEEE8021-PFC-MIB totals)
    rx_pause        bigint,
    tx_pause        bigint,
    interval_s      real,
    rx_pause_pps    double precision,
    tx_pause_pps    double precision,
    counter_reset   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (switch, port, priority, time)
);
SELECT create_hypertable('pfc_counters', 'time', chunk_time_interval => interval '1 hour');
CREATE INDEX pfc_counters_time ON pfc_counters (time DESC);

-- Oper-status transitions. down_s is the length of the outage a 'down -> up' transition ends.
CREATE TABLE link_events (
    time         timestamptz NOT NULL,
    switch       text NOT NULL,
    port         text NOT NULL,
    old_status   text NOT NULL,
    new_status   text NOT NULL,
    down_s       double precision,
    source       text NOT NULL DEFAULT 'oper-status',
    PRIMARY KEY (switch, port, time, new_status)
);
SELECT create_hypertable('link_events', 'time', chunk_time_interval => interval '1 day');

-- Whether the collector could reach each switch, one row per change or per check.
CREATE TABLE switch_reachability (
    time        timestamptz NOT NULL,
    switch      text NOT NULL,
    reachable   boolean NOT NULL,
    state       text NOT NULL,       -- connected, stale, unreachable, error, ...
    protocol    text,
    detail      text,
    PRIMARY KEY (switch, time)
);
SELECT create_hypertable('switch_reachability', 'time', chunk_time_interval => interval '1 day');
