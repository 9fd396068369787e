"""The seed's load test: N crawl workers (separate processes, as on separate hosts) on one
simulated web with the seed's response-time distribution, measured from outside."""
