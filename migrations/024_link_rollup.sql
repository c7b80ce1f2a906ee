-- Link health's rollup (issue 26): per port and 10-minute bucket, the sums a least-squares line
-- needs (n, Σu, Σu², Σy, Σuy, u in seconds from the bucket's start) and the bucket's latest row,
-- so the check's summary reads ~36 rows per port over its 6 h window instead of ~360. Written
-- only by store/link_rollup.py (the analyzer's fit rolls closed buckets, and rolls again one
-- whose row count changed: a late row); retention in store/retention.py.
CREATE TABLE dom_rollup (
    bucket          timestamptz NOT NULL,
    switch          text NOT NULL,
    port            text NOT NULL,
    n               integer NOT NULL,      -- rows in the bucket
    last_time       timestamptz NOT NULL,  -- the bucket's latest row, and its values below
    rx_power_dbm    double precision,
    laser_bias_ma   double precision,
    rx_low_warning_dbm    double precision,
    rx_low_critical_dbm   double precision,
    bias_high_critical_ma double precision,
    rx_n   integer NOT NULL, rx_su   double precision NOT NULL, rx_suu   double precision NOT NULL,
    rx_sy  double precision NOT NULL, rx_suy double precision NOT NULL,
    bias_n integer NOT NULL, bias_su double precision NOT NULL, bias_suu double precision NOT NULL,
    bias_sy double precision NOT NULL, bias_suy double precision NOT NULL,
    PRIMARY KEY (switch, port, bucket)
);
SELECT create_hypertable('dom_rollup', 'bucket', chunk_time_interval => interval '1 day');

-- log10(pre-FEC BER) of the rows with a BER above 0, as the check fits it.
CREATE TABLE fec_rollup (
    bucket      timestamptz NOT NULL,
    switch      text NOT NULL,
    port        text NOT NULL,
    n_rows      integer NOT NULL,          -- rows in the bucket, with a BER or not
    last_time   timestamptz,               -- the latest row with a BER, and its log10 (NULL: none)
    log_ber     double precision,
    n   integer NOT NULL, su double precision NOT NULL, suu double precision NOT NULL,
    sy  double precision NOT NULL, suy double precision NOT NULL,
    PRIMARY KEY (switch, port, bucket)
);
SELECT create_hypertable('fec_rollup', 'bucket', chunk_time_interval => interval '1 day');

-- The buckets rolled, with the raw rows each held when rolled or last counted (a different count
-- now: late rows landed in it), and when it was last counted (the least recent are counted next).
CREATE TABLE link_rollup_buckets (
    bucket      timestamptz PRIMARY KEY,
    dom_rows    bigint NOT NULL,
    fec_rows    bigint NOT NULL,
    counted_at  timestamptz NOT NULL
);
