-- Shard leases for `collector.shard: auto` (store/shard_leases.py writes both tables).
-- A collector holds shard I of N while its lease is unexpired; taking a lease over bumps its
-- epoch, and every write of a fenced collector checks holder and epoch in its own transaction
-- (FOR SHARE), so a takeover waits for a write in flight and refuses every later one.
-- Times are the database's clock: collectors' clocks never decide who holds what.
CREATE TABLE collector_shards (
    shards     integer     NOT NULL CHECK (shards > 0),
    shard      integer     NOT NULL CHECK (shard >= 0 AND shard < shards),
    holder     text,
    epoch      bigint      NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT '-infinity',
    claimed_at timestamptz,
    PRIMARY KEY (shards, shard)
);

-- Every `shard: auto` collector, holding shards or standing by, renews its row with its leases:
-- an orphaned shard goes to the live member holding the fewest (a standby first).
CREATE TABLE collector_members (
    holder     text        PRIMARY KEY,
    shards     integer     NOT NULL CHECK (shards > 0),
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
