-- Wake other brokers' long polls of a queue (consume/wakeups.py).
SELECT pg_notify(:channel, :queue)
