-- Alert re-notification state and per-alert delivery order in the webhook outbox.

-- The action the analyzer recommends for an alert now, and the highest severity and action any
-- webhook was told about: a firing alert is sent again (alert.firing) only when it escalates past
-- what was notified, so a severity that see-saws cannot storm receivers.
ALTER TABLE alerts
    ADD COLUMN recommended_action text CHECK (recommended_action IN ('drain', 'checkpoint', 'observe')),
    ADD COLUMN notified_severity  text CHECK (notified_severity IN ('info', 'warning', 'critical')),
    ADD COLUMN notified_action    text CHECK (notified_action IN ('drain', 'checkpoint', 'observe'));

-- Enqueue order. A sender never sends a delivery while an earlier one for the same alert and
-- receiver is still pending, so a receiver sees firing before resolved even across retries.
ALTER TABLE webhook_deliveries ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX webhook_deliveries_alert_pending
    ON webhook_deliveries (webhook, alert_id, seq) WHERE status = 'pending';
