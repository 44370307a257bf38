"""The data stores' plumbing (platform layer): our Postgres backend (selected
in chatforge/settings/database.py), when connections are given back
(``connections``), plain SQL rows for the hot paths (``sql_rows``), and the
Redis cache that reuses its connections (``redis_cache``)."""
