-- One queue's row, with its effective options.
SELECT q.* FROM queen.queues q WHERE q.name = :queue
