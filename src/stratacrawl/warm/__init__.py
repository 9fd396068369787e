"""Warm tier: Elasticsearch weekly indices (dedup fingerprints, page metadata)."""
