-- A status transition that carrier-transitions had already counted as a flap (the status came on
-- another stream, after the counter) is still a link event, for its outage length, but it stands
-- for no further flap: flaps = 0 (collector/counters.py).
ALTER TABLE link_events DROP CONSTRAINT link_events_flaps_check;
ALTER TABLE link_events ADD CONSTRAINT link_events_flaps_check CHECK (flaps >= 0);
