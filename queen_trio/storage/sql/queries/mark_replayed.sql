-- Spool replay: record the message ids about to land; those already recorded landed before.
INSERT INTO queen.spool_replayed (message_id) SELECT unnest(:message_ids::uuid[])
ON CONFLICT DO NOTHING RETURNING message_id
