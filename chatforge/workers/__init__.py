"""What the Celery processes and the broker run on (platform layer): the
Celery configuration read from Django settings, the broker transport and the
guard around acknowledgements when the broker drops, the broker's plain Redis
client, batched task events, and the gevent worker's cooperative waits."""
