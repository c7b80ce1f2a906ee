-- The fabric inventory: what the design says exists. Loaded from a generated topology or an
-- inventory file (`fabricmon` loads it at start); ports a switch reports that the inventory
-- does not know are added by the collector with known = false.

CREATE TABLE switches (
    name          text PRIMARY KEY,
    role          text NOT NULL CHECK (role IN ('leaf', 'spine', 'superspine', 'unknown')),
    idx           integer,
    grp           integer,
    rail          integer,
    plane         integer,
    radix         integer,
    speed_gbps    double precision,
    mgmt_address  text,
    known         boolean NOT NULL DEFAULT true,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE servers (
    name        text PRIMARY KEY,
    grp         integer NOT NULL,
    idx         integer NOT NULL,
    gpus        integer NOT NULL
);

CREATE TABLE ports (
    switch       text NOT NULL,
    port         text NOT NULL,
    number       integer,
    direction    text CHECK (direction IN ('down', 'up')),
    speed_gbps   double precision,
    peer_node    text,
    peer_port    text,
    link_kind    text,
    known        boolean NOT NULL DEFAULT true,
    first_seen   timestamptz,
    PRIMARY KEY (switch, port)
);
CREATE INDEX ports_unknown ON ports (switch) WHERE NOT known;

CREATE TABLE links (
    a_node      text NOT NULL,
    a_port      text NOT NULL,
    b_node      text NOT NULL,
    b_port      text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('server-leaf', 'leaf-spine', 'spine-superspine')),
    rail        integer,
    speed_gbps  double precision NOT NULL,
    PRIMARY KEY (a_node, a_port),
    UNIQUE (b_node, b_port)
);
CREATE INDEX links_b ON links (b_node);

-- One row per fabric, so the service can tell which design the tables hold.
CREATE TABLE fabric_meta (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    params      jsonb NOT NULL,
    summary     jsonb NOT NULL,
    loaded_at   timestamptz NOT NULL DEFAULT now()
);
