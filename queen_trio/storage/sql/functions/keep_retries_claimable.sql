-- A group with retried dead letters has something to claim on the partition even when its
-- cursor is caught up: whoever sets head_at to NULL (acks, claims, eviction) leaves it at the
-- oldest retried dead letter instead.
CREATE OR REPLACE FUNCTION queen.keep_retries_claimable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.head_at := (SELECT min(dl.message_created_at) FROM queen.dead_letters dl
                     WHERE dl.partition_id = NEW.partition_id
                       AND dl.consumer_group = NEW.consumer_group
                       AND dl.retry_requested_at IS NOT NULL);
    RETURN NEW;
END;
$$;
