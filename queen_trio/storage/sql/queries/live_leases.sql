-- POST /api/v1/transaction's requiredLeases: how many of them are live right now.
SELECT count(DISTINCT lease_id) FROM queen.consumer_state
 WHERE lease_id = ANY(:lease_ids::uuid[]) AND lease_expires_at > clock_timestamp()
