-- Of these queue names, those that exist and encrypt at rest (a timer is encrypted at
-- schedule when its queue does then).
SELECT q.name FROM queen.queues q WHERE q.name = ANY(:names::text[]) AND q.encryption_enabled
