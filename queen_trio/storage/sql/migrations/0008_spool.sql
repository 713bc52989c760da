-- Message ids that a spool replay committed: a record whose file outlived its commit (a crash
-- between the two) is recognised and skipped, whatever the queue's dedup window. Pruned by the
-- retention pass after a week.
CREATE TABLE queen.spool_replayed (
    message_id  uuid PRIMARY KEY,
    replayed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
