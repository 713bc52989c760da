-- How far retention has pruned each partition's dedup index and trace events: no row of
-- either is left below `pruned_to` (functions/retention_pass, step 4), which then visits only
-- the partitions whose first kept offset rose above it. Before, every pass scanned the whole
-- dedup index for rows below their partition's first kept offset (no index serves an offset
-- range across a partition's transaction ids): on a database of a few million messages the
-- pass ran past the statement timeout, and that undid its retention and eviction too. Only
-- retention writes here (under its advisory lock); a partition with no row has pruned nothing
-- yet. No foreign key: its check would share-lock the partition row until the pass commits,
-- and every push to the partition locks that row for update. Retention removes the rows of
-- partitions that are gone.
CREATE TABLE queen.index_pruning (
    partition_id uuid PRIMARY KEY,
    pruned_to    bigint NOT NULL
);
