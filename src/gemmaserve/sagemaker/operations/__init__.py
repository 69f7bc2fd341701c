"""A running endpoint: ``status`` (its state and the wait to InService), ``logs``, ``runtime`` (invoke and
stream), ``autoscale``, ``inventory`` (list, expired, orphans)."""
