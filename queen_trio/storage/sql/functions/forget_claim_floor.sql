-- A state row's head_at went below what its group's claim floor may be (a seek back, a new
-- start, a retried dead letter): the floor is unknown again, and the next claim of the group
-- finds it from the start (functions/pop_claim). Fired by triggers/consumer_state_floor,
-- never by the moves of a cursor forward or a push's commit time. Rows are inserted only
-- with a new subscription (whose floor is NULL) or with no head_at (a push's new partition),
-- so inserts need no trigger.
CREATE OR REPLACE FUNCTION queen.forget_claim_floor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queen.subscriptions s SET claim_floor = NULL, claim_floor_at = NULL
     WHERE s.queue_id = NEW.queue_id AND s.consumer_group = NEW.consumer_group
       AND s.claim_floor > NEW.head_at;
    RETURN NULL;
END;
$$;
