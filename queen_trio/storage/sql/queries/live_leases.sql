-- POST /api/v1/transaction's requiredLeases: how many of them are live right now.
SELECT queen.live_lease_count(:lease_ids::uuid[])
