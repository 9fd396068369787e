"""Tier movement: demotion to warm, hot eviction, warm → cold sinking, lookups across
tiers, recovery after a loss, and compensation of stuck work."""
