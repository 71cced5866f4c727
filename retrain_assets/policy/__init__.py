"""The retraining policy: decides, per customer, when to train, and records every decision."""
