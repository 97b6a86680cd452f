"""The pipeline's Prometheus metrics (served by `ripple pipeline run --metrics-port`)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

EVENTS_TRIGGERED = Counter(
    "ripple_events_triggered", "Events routed to a destination (one per destination)"
)
EVENTS_LOST = Counter(
    "ripple_events_lost", "Events that could be neither delivered nor queued for retry"
)
EVENTS_UNROUTED = Counter(
    "ripple_events_unrouted", "Events of buckets without any destination, discarded"
)
PUSH_OK = Counter("ripple_push_ok", "Events a destination acknowledged", ["destination"])
PUSH_FAIL = Counter("ripple_push_fail", "Failed delivery attempts", ["destination"])
PUSH_PENDING = Gauge("ripple_push_pending", "Events being sent", ["destination"])
RETRY_QUEUE_LENGTH = Gauge(
    "ripple_retry_queue_length", "Events waiting in a destination's retry queue", ["destination"]
)
DEADLETTER = Counter("ripple_deadletter", "Events moved to the dead letters", ["destination"])
PIPELINE_LAG = Gauge(
    "ripple_pipeline_lag_seconds", "Now minus the commit time of the newest delivered record"
)
BATCH_DURATION = Histogram(
    "ripple_batch_duration_seconds",
    "Time to route and deliver one micro-batch",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
