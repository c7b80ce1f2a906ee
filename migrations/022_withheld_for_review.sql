-- An executor's own fleet breaker (schedulers.slurm.max_drained_nodes) withheld an action: why,
-- recorded in the action's row by the executor. The analyzer's next round reads these and turns
-- the incident to review (store/scheduler_actions.py: withheld_for_review); the executor never
-- calls back into the analyzer.
ALTER TABLE scheduler_actions ADD COLUMN review_reason text;
CREATE INDEX scheduler_actions_review ON scheduler_actions (alert_id) WHERE review_reason IS NOT NULL;
