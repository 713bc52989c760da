-- KV, and the lock permits that live in it (namespace `queen-locks`, key `<name>#<slot>`).
-- Byte-order collation: a stable cursor for prefix pages and one lock order on every machine.
-- `version` comes from kv_version_seq (CACHE 1), drawn only while the row lock is held, so a
-- key's versions rise in commit order and a lock's fencing token only rises. NULL
-- `expires_at` is forever; an expired row counts as absent whether or not it was swept.
CREATE SEQUENCE queen.kv_version_seq AS bigint CACHE 1;

CREATE TABLE queen.kv (
    ns         text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      jsonb NOT NULL,
    version    bigint NOT NULL,
    expires_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (ns, key)
) WITH (fillfactor = 70, vacuum_truncate = off, autovacuum_vacuum_scale_factor = 0.05);

-- The sweeper's only reader.
CREATE INDEX kv_expiry ON queen.kv (expires_at) WHERE expires_at IS NOT NULL;
