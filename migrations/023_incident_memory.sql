-- What a firing incident is remembered by across rounds, out of the payload (issue 27): the
-- pause-tree ports of its PFC storms and the links a switch incident holds, which the correlation
-- reads to continue a firing incident rather than open a second one (analyzer/incident_memory.py).
-- They were keys of alerts.details (incident_key, storm_ports, switch_links), so webhook receivers
-- and /v1/alerts saw them; details now holds evidence only. One row per firing incident, written
-- in the alert sync's transaction by store/incident_memory.py (its only writer), dropped when the
-- incident resolves (and with its alert).
CREATE TABLE incident_memory (
    alert_id      bigint PRIMARY KEY REFERENCES alerts (id) ON DELETE CASCADE,
    incident_key  text NOT NULL,
    storm_ports   text[] NOT NULL DEFAULT '{}',
    switch_links  text[] NOT NULL DEFAULT '{}',
    updated_at    timestamptz NOT NULL DEFAULT now()
);

INSERT INTO incident_memory (alert_id, incident_key, storm_ports, switch_links)
SELECT id,
       details ->> 'incident_key',
       ARRAY(SELECT jsonb_array_elements_text(
           CASE WHEN jsonb_typeof(details -> 'storm_ports') = 'array' THEN details -> 'storm_ports' ELSE '[]' END)),
       ARRAY(SELECT jsonb_array_elements_text(
           CASE WHEN jsonb_typeof(details -> 'switch_links') = 'array' THEN details -> 'switch_links' ELSE '[]' END))
FROM alerts
WHERE state = 'firing' AND jsonb_typeof(details -> 'incident_key') = 'string';

-- The servers receivers were told a firing incident touches (an escalation on growth is sent once
-- per growth): the alert's own bookkeeping, beside notified_severity and notified_action.
ALTER TABLE alerts ADD COLUMN notified_servers text[];
UPDATE alerts SET notified_servers = ARRAY(SELECT jsonb_array_elements_text(details -> 'notified_servers'))
WHERE jsonb_typeof(details -> 'notified_servers') = 'array';

UPDATE alerts SET details = details - 'incident_key' - 'storm_ports' - 'switch_links' - 'notified_servers'
WHERE details ?| ARRAY['incident_key', 'storm_ports', 'switch_links', 'notified_servers'];
