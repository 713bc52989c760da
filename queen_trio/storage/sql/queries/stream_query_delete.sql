-- DELETE /streams/v1/queries/:name: the query goes, and with it (cascade) its state, its
-- cycle ledger and its streams groups. Its consumer group's cursors stay (a group of the
-- queue like any other; delete it through /api/v1/consumer-groups).
DELETE FROM queen.stream_queries WHERE name = :name RETURNING id
