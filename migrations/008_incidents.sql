-- Alerts become incidents: the findings that share one root cause (SPEC §9.1).

-- An alert row is an incident: its fingerprint is the hash of its place (analyzer/incidents.py),
-- `rule` its root cause's rule. `labels` are the Alertmanager labels fixed when it opened, so a
-- receiver sees the same label set on every firing and on the resolve. `action_hosts` are the
-- hosts the recommended action applies to. `needs_review`: the circuit breaker withheld a drain.
ALTER TABLE alerts
    ADD COLUMN root_cause   jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN symptoms     jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD COLUMN needs_review boolean NOT NULL DEFAULT false,
    ADD COLUMN labels       jsonb,
    ADD COLUMN action_hosts text[] NOT NULL DEFAULT '{}',
    ADD COLUMN reason       text;

-- Each incident's timeline: opened, escalated, changed (root or symptoms), resolved.
CREATE TABLE incident_events (
    id        bigserial PRIMARY KEY,
    alert_id  bigint NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    time      timestamptz NOT NULL,
    event     text NOT NULL CHECK (event IN ('opened', 'escalated', 'changed', 'resolved')),
    severity  text NOT NULL,
    action    text NOT NULL,
    rule      text NOT NULL,
    summary   text NOT NULL,
    symptoms  integer NOT NULL DEFAULT 0
);
CREATE INDEX incident_events_alert ON incident_events (alert_id, time);
