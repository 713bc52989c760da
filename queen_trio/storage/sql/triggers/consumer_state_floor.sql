-- A head_at set lower than it was, or set from nothing to a time before the writer's own
-- transaction began, may be below the group's claim floor: queen.forget_claim_floor. (A push
-- sets a commit time taken after its transaction began, and a claim never raises the floor
-- above the start of a transaction writing at the time.) AFTER: it sees the head_at that
-- queen.keep_retries_claimable put in.
CREATE OR REPLACE TRIGGER consumer_state_floor
    AFTER UPDATE OF head_at ON queen.consumer_state
    FOR EACH ROW
    WHEN (NEW.head_at IS NOT NULL
          AND (NEW.head_at < OLD.head_at OR (OLD.head_at IS NULL AND NEW.head_at < now())))
    EXECUTE FUNCTION queen.forget_claim_floor();
