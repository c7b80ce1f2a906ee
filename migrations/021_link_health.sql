-- Link health (SPEC §10.5, issue 26): FEC counters and transceiver DOM, one row per port and
-- sample. Counters are cumulative as the device reports them (bigint holding the unsigned 64
-- bits, store/records.to_int8); the analyzer takes deltas over its window. Written only by
-- store/fec.py (port_fec) and store/dom.py (transceiver_dom); retention in store/retention.py.
CREATE TABLE port_fec (
    time            timestamptz NOT NULL,
    switch          text NOT NULL,
    port            text NOT NULL,
    corrected       bigint,            -- codewords corrected (fec-corrected-blocks; SONiC CORRECTABLE_FRAMES)
    uncorrectable   bigint,            -- codewords not corrected (fec-uncorrectable-blocks; NOT_CORRECTABLE_FRAMES)
    symbol_errors   bigint,            -- in-symbol-error
    pre_fec_ber     double precision,  -- instant, where the device computes it
    post_fec_ber    double precision,
    bins            bigint[]           -- codewords by symbol errors S0..S15 (SONiC, Cumulus); NULL: none
);
SELECT create_hypertable('port_fec', 'time', chunk_time_interval => interval '1 day');
CREATE INDEX port_fec_port_time ON port_fec (switch, port, time DESC);

-- One row per port (the interface the device maps the transceiver to) and DOM sample. Powers
-- are the module's (worst lane's) figures; thresholds are the module's own, NULL when it
-- reports none (the analyzer then uses configured ones).
CREATE TABLE transceiver_dom (
    time                   timestamptz NOT NULL,
    switch                 text NOT NULL,
    port                   text NOT NULL,
    component              text NOT NULL,
    rx_power_dbm           double precision,
    tx_power_dbm           double precision,
    laser_bias_ma          double precision,
    temperature_c          double precision,
    rx_low_warning_dbm     double precision,
    rx_low_critical_dbm    double precision,
    bias_high_warning_ma   double precision,
    bias_high_critical_ma  double precision
);
SELECT create_hypertable('transceiver_dom', 'time', chunk_time_interval => interval '1 day');
CREATE INDEX transceiver_dom_port_time ON transceiver_dom (switch, port, time DESC);
