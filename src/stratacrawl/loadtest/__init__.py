"""The load test: N crawl workers (separate processes, as on separate hosts) on one
simulated web answering like real sites under load (log-normal response times, median
~1.6 s, a slow tail, 0.4 % 5xx and 0.2 % dropped connections), measured from outside."""
