"""``fabricmon demo``: the whole story on one machine (simulator, collectors, analyzer, API, webhooks)."""
