-- A pop whose reply could not be sent gives its lease back (counts no failed delivery).
SELECT queue_name FROM queen.release_lease(:lease_id)
