-- A receiver's client errors (4xx other than 408 and 429) do not heal by retrying: the sender counts
-- them per delivery, in a row, and gives the delivery up as `failed` after `alerts.max_attempts_4xx`.
-- Any other answer (2xx aside: 5xx, 408, 429, a timeout, a refused connection) resets the count.
ALTER TABLE webhook_deliveries ADD COLUMN client_errors integer NOT NULL DEFAULT 0;

-- /metrics counts failed and pending deliveries per receiver on every scrape; delivered rows (the
-- bulk of the table) are never read for it. Pending rows already have webhook_deliveries_due.
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (webhook) WHERE status = 'failed';
