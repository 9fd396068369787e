"""The frontier: task ledger (cold), hot ready queues with leases (Redis), dedup, scheduling."""
