"""Warm tier: Elasticsearch weekly indices (dedup facts, page metadata). Public:
``store.WarmStore`` (every operation on the tier), ``indices.IndexLayout`` (index names
and settings) and ``client.make_client``, which only the composition root calls."""
