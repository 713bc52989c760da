-- Streams (docs/streams.md): the registry of named queries, their state shards and the ledger
-- of committed cycles, for the official clients' streaming SDK (/streams/v1/*).

-- A query by name: the SDK's query id. `source_queue` and `sink_queue` are what the SDK said
-- at its last registration (shown by the dashboard and the CLI, never checked).
CREATE TABLE queen.stream_queries (
    id           uuid PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    source_queue text NOT NULL,
    sink_queue   text,
    config_hash  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The state store, one shard per (query, source partition). Keys in byte order (COLLATE "C").
-- The partition's foreign key removes the shards of a deleted queue or partition: a partition
-- created again under the same name has a new id and starts with no state.
CREATE TABLE queen.stream_state (
    query_id     uuid NOT NULL REFERENCES queen.stream_queries (id) ON DELETE CASCADE,
    partition_id uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    key          text COLLATE "C" NOT NULL,
    value        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (query_id, partition_id, key)
);

CREATE INDEX stream_state_partition ON queen.stream_state (partition_id);

-- Committed cycles by their key (docs/decisions.md#streams-replayed-cycles): a replay is
-- answered with the first reply. Pruned after an hour by the cycles that follow.
CREATE TABLE queen.stream_cycles (
    query_id     uuid NOT NULL REFERENCES queen.stream_queries (id) ON DELETE CASCADE,
    partition_id uuid NOT NULL,
    cycle_key    text NOT NULL,
    reply        jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (query_id, partition_id, cycle_key)
);

CREATE INDEX stream_cycles_age ON queen.stream_cycles (query_id, created_at);

-- The consumer groups that feed a query (its source group): their expired leases are not
-- failed deliveries (docs/decisions.md#streams-lease-expiries).
CREATE TABLE queen.stream_groups (
    queue_name     text NOT NULL,
    consumer_group text NOT NULL,
    query_id       uuid NOT NULL REFERENCES queen.stream_queries (id) ON DELETE CASCADE,
    PRIMARY KEY (queue_name, consumer_group)
);

CREATE INDEX stream_groups_query ON queen.stream_groups (query_id);
