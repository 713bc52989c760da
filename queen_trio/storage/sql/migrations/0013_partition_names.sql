-- A partition's queue and name, in a row of their own. Every push updates its partition's
-- row (next_offset, last_commit_at), so under a held xmin each look-up of that row walks
-- every version the hold keeps: a push resolving (queue, name) to its partition, a claim
-- naming the partition it claimed, an ack naming the partition it settles
-- (docs/performance.md, "A partition's name apart from its row"). A partition's queue and
-- name never change: they are written here once, when the partition is created
-- (triggers/partitions_named), deleted with it (functions/forget_partitions), and those
-- look-ups read them here.
CREATE TABLE queen.partition_names (
    id       uuid PRIMARY KEY,
    queue_id uuid NOT NULL,
    name     text NOT NULL,
    UNIQUE (queue_id, name)
);
-- Filled by the trigger's install (triggers/partitions_named), in the transaction that
-- creates it: partitions created between this migration and that install are named too.
