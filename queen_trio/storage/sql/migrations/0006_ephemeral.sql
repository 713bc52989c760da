-- Ephemeral queues (docs/ephemeral.md): only their declarations and the processes that serve
-- them live here, never a message.

-- What POST /api/v1/ephemeral/configure declared: written before it is applied in RAM, read
-- back (the queues come back declared and empty) whenever a process becomes the owner.
CREATE TABLE queen.ephemeral_queues (
    queue       text PRIMARY KEY,
    options     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Every broker process on the database, with the address its peers reach it at and the
-- secret its forwards carry (ephemeral/owner.py). Refreshed every heartbeat.
CREATE TABLE queen.ephemeral_members (
    member_id     text PRIMARY KEY,
    address       text,
    secret        text NOT NULL,
    backend_pid   integer NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now()
);

-- The owner of every ring: the member whose session holds the ephemeral advisory lock. The
-- row alone proves nothing (a dead owner's row stays until the next one overwrites it): it is
-- read joined with pg_locks.
CREATE TABLE queen.ephemeral_owner (
    id            integer PRIMARY KEY CHECK (id = 1),
    member_id     text NOT NULL,
    address       text,
    backend_pid   integer NOT NULL,
    incarnation   text NOT NULL,
    since         timestamptz NOT NULL DEFAULT now()
);
