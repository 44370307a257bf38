"""How steps reach workers (engine): enqueueing a run's next step after its
transaction commits (``dispatch``), noticing that the broker lost what it
held (``broker_loss``), and the name of the worker running a step
(``worker_identity``). Postgres is the outbox (decision 0007): a message
only says which row to look at."""
