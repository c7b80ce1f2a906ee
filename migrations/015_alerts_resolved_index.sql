-- Every Alertmanager push (analyzer/alertmanager.py) reads the firing incidents and those resolved
-- in the last five minutes. Resolved rows only accumulate, so they are found by their end time
-- instead of being scanned; the firing ones come from alerts_one_firing.
CREATE INDEX alerts_resolved_ended ON alerts (ended_at) WHERE state = 'resolved';
