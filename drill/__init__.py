"""fabricmon drill: a seeded campaign of faults and benign events, scored against what fabricmon did."""
