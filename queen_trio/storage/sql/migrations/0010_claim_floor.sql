-- The claim's floor (functions/pop_claim, docs/performance.md#the-claims-floor): per group, a
-- time at or below the head_at of every one of its state rows. The claim scans its index of
-- pending partitions from there, not from the start, where the dead index entries of rows
-- that moved on pile up while something holds the xmin horizon back (a long transaction, a
-- stale replication slot): every claim stepped over all of them. NULL: not known, the claim
-- scans from the start. A claim raises it when `claim_floor_at` is older than 2 s; whoever
-- sets a head_at below it sets it NULL again (triggers/consumer_state_floor).
ALTER TABLE queen.subscriptions
    ADD COLUMN claim_floor    timestamptz,
    ADD COLUMN claim_floor_at timestamptz;
