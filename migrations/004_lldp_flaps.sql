-- LLDP neighbours as the switches report them (the cabling check reads this), and the number of
-- flaps a link event stands for (carrier-transitions can count flaps that sampling missed).

CREATE TABLE lldp_neighbors (
    switch            text NOT NULL,
    port              text NOT NULL,
    system_name       text NOT NULL,
    port_id           text NOT NULL,
    port_description  text,
    chassis_id        text,
    seen_at           timestamptz NOT NULL,
    PRIMARY KEY (switch, port, system_name, port_id)
);
CREATE INDEX lldp_neighbors_remote ON lldp_neighbors (system_name);

ALTER TABLE link_events ADD COLUMN flaps integer NOT NULL DEFAULT 1 CHECK (flaps >= 1);

-- A digest of the loaded inventory, so services starting together load it once.
ALTER TABLE fabric_meta ADD COLUMN digest text;
