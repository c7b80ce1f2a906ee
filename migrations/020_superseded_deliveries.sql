-- A firing delivery still pending when a later transition of the same incident is stored for the
-- same receiver (an escalation, a resolve) is `superseded`: the later body carries the incident's
-- state as it is now, so the stale one is never sent, not even after a restart (analyzer/outbox.py).
-- (Version 019 is left to the change that was in flight beside this one.)
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
    CHECK (status IN ('pending', 'delivered', 'failed', 'superseded'));
