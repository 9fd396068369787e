"""Hot tier: Redis (queues, leases, limiters, Bloom filter, hot URL state, sessions)."""
