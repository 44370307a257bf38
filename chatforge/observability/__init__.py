"""What an operator sees of a running fleet: Prometheus metrics (this
package), exposed on the web process's ``/metrics`` and on a port per worker
(docs/observability.md)."""
