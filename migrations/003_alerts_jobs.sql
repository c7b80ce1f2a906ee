-- Alerts, the webhook outbox and the training jobs a scheduler registers.

CREATE TABLE jobs (
    id             text PRIMARY KEY,
    hosts          text[] NOT NULL,
    started_at     timestamptz,
    expected_days  double precision,
    created_at     timestamptz NOT NULL DEFAULT now(),
    meta           jsonb NOT NULL DEFAULT '{}'::jsonb
);

CREATE TABLE alerts (
    id            bigserial PRIMARY KEY,
    fingerprint   text NOT NULL,
    rule          text NOT NULL,
    severity      text NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    state         text NOT NULL CHECK (state IN ('firing', 'resolved')),
    summary       text NOT NULL,
    scope         jsonb NOT NULL DEFAULT '{}'::jsonb,
    details       jsonb NOT NULL DEFAULT '{}'::jsonb,
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz,
    last_seen_at  timestamptz NOT NULL,
    acked_at      timestamptz,
    acked_by      text
);
-- At most one firing alert per fingerprint: an analyzer restart finds it instead of re-firing.
CREATE UNIQUE INDEX alerts_one_firing ON alerts (fingerprint) WHERE state = 'firing';
CREATE INDEX alerts_state_started ON alerts (state, started_at DESC);

-- The outbox: a delivery is stored in the same transaction as the alert transition, then
-- senders claim rows with FOR UPDATE SKIP LOCKED. The id is the X-Fabricmon-Delivery header.
CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    alert_id         bigint REFERENCES alerts (id) ON DELETE SET NULL,
    webhook          text NOT NULL,          -- the receiver's key (a hash of its URL), never its secret
    event            text NOT NULL CHECK (event IN ('alert.firing', 'alert.resolved')),
    body             bytea NOT NULL,         -- exactly the bytes that are signed and sent
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook, next_attempt_at) WHERE status = 'pending';
