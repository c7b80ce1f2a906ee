-- Scheduler actions (SPEC §9.3): the outbox and the audit trail in one table, written by
-- schedulers/outbox.py only. A row is stored in the incident transition's own transaction (so an
-- incident and the drain it asks for commit or vanish together), then an executor claims it,
-- runs it against the scheduler and records what happened. Rows are kept: GET /v1/actions.
CREATE TABLE scheduler_actions (
    id               uuid PRIMARY KEY,
    seq              bigint GENERATED ALWAYS AS IDENTITY,
    alert_id         bigint REFERENCES alerts (id) ON DELETE SET NULL,
    scheduler        text NOT NULL,                 -- 'slurm'
    action           text NOT NULL CHECK (action IN ('drain', 'resume', 'checkpoint')),
    hosts            text[] NOT NULL,               -- fabric server names the incident names
    reason           text NOT NULL,                 -- the scheduler's reason text, or why withheld
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'done', 'failed', 'withheld', 'dry_run')),
    attempts         integer NOT NULL DEFAULT 0,
    refusals         integer NOT NULL DEFAULT 0,    -- the scheduler said no (not an outage), in a row
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    done_at          timestamptz,
    nodes            text[] NOT NULL DEFAULT '{}',  -- scheduler node names acted on
    commands         text[] NOT NULL DEFAULT '{}',  -- what was run (or would be, in a dry run)
    result           jsonb,                         -- per node (or job): what happened and why
    last_error       text
);
-- Executors run a scheduler's actions in order (a resume never overtakes its drain).
CREATE INDEX scheduler_actions_pending ON scheduler_actions (scheduler, seq) WHERE status = 'pending';
CREATE INDEX scheduler_actions_created ON scheduler_actions (created_at DESC);
CREATE INDEX scheduler_actions_alert ON scheduler_actions (alert_id);
