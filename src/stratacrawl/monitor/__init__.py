"""Monitoring: live counters and request traces in hot, the seven
metric families, alert rules with levels and hold times, anomaly snapshots, the weekly
inspection, and the ops page."""
