-- Maintenance windows (SPEC §10.4), written by analyzer/maintenance.py only: the API's
-- POST/DELETE /v1/maintenance (source 'api') and Slurm's MAINT reservations (source
-- 'slurm:<reservation name>', one row per reservation, kept equal to what Slurm holds).
-- The analyzer reads the windows in force and those ended within its flap window: an incident
-- on a place inside an active window is marked `maintenance` with action observe, and link
-- events and error counts inside a window are not judged (analyzer/coverage.py).
CREATE TABLE maintenance_windows (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    switches    text[] NOT NULL DEFAULT '{}',
    servers     text[] NOT NULL DEFAULT '{}',
    rails       integer[] NOT NULL DEFAULT '{}',
    start_at    timestamptz NOT NULL,
    end_at      timestamptz NOT NULL,
    reason      text NOT NULL DEFAULT '',
    source      text NOT NULL CHECK (source = 'api' OR source LIKE 'slurm:%'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (end_at > start_at),
    CHECK (cardinality(switches) + cardinality(servers) + cardinality(rails) > 0)
);
-- One window per Slurm reservation (upserted by name); API windows are many.
CREATE UNIQUE INDEX maintenance_windows_slurm ON maintenance_windows (source) WHERE source <> 'api';
CREATE INDEX maintenance_windows_end ON maintenance_windows (end_at);

-- An incident inside a window: action observe, and receivers are told so.
ALTER TABLE alerts ADD COLUMN maintenance boolean NOT NULL DEFAULT false;
