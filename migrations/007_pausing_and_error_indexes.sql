-- Partial indexes for the two checks that look for the few ports with something wrong among all
-- of them: PFC pausing (analyzer/pfc.py) and errors or discards (analyzer/stability.py). Each
-- predicate is the literal condition of the check's candidate query, so the planner proves the
-- index applies; the index holds only the rows that pause or drop, so a healthy fabric pays
-- nearly nothing to maintain it. At 16,384 GPUs this turns a 2M-row scan of pfc_counters per
-- evaluation (~0.2 s) into an index probe (docs/benchmarks.md).

CREATE INDEX pfc_counters_pausing ON pfc_counters (time DESC)
    WHERE tx_pause_pps > 0 OR rx_pause_pps > 0;

CREATE INDEX port_counters_faulty ON port_counters (time DESC)
    WHERE NOT counter_reset
      AND (in_fcs_errors_ps > 0 OR in_errors_ps > 0 OR in_discards_ps > 0 OR out_discards_ps > 0);
