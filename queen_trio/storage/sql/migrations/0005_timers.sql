-- Timers (docs/timers.md): a message scheduled into a queue partition after a delay, upserted
-- on (queue, timer_key) until it fires. Keyed by names, not a queue id: scheduling never
-- creates or locks a queue row (the fire's push creates the queue, as a push does).
-- claim_token/claimed_until: a broker holds the timer while it fires it (functions/
-- timers_claim); claimed_until without a token is a failed fire's backoff. visible_at, the
-- later of the two times, is when any broker may claim it next: the sweeper's one index.
CREATE TABLE queen.timers (
    queue         text COLLATE "C" NOT NULL,
    timer_key     text COLLATE "C" NOT NULL,
    partition     text NOT NULL DEFAULT 'Default',
    deliver_at    timestamptz NOT NULL,
    txn           text NOT NULL,
    -- The id promised at schedule time (a UUIDv7 whose time is deliver_at).
    message_id    uuid NOT NULL,
    -- The JSON document the message will carry (its ciphertext when encrypted).
    payload       bytea NOT NULL,
    encrypted     boolean NOT NULL DEFAULT false,
    producer_sub  text,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    claim_token   uuid,
    claimed_until timestamptz,
    visible_at    timestamptz GENERATED ALWAYS AS (greatest(deliver_at, claimed_until)) STORED,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (queue, timer_key)
);

CREATE INDEX timers_visible ON queen.timers (visible_at);

