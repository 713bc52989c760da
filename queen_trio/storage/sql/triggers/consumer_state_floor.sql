-- A head_at set lower than it was, or set from nothing to a time more than 2.5 s ago, may be
-- below the group's claim floor: queen.forget_claim_floor. (A claim sets the floor at least
-- 5 s in the past, so a push's commit time, set a moment ago, never is.) AFTER: it sees the
-- head_at that queen.keep_retries_claimable put in.
CREATE OR REPLACE TRIGGER consumer_state_floor
    AFTER UPDATE OF head_at ON queen.consumer_state
    FOR EACH ROW
    WHEN (NEW.head_at IS NOT NULL
          AND (NEW.head_at < OLD.head_at
               OR (OLD.head_at IS NULL
                   AND NEW.head_at < clock_timestamp() - interval '2.5 seconds')))
    EXECUTE FUNCTION queen.forget_claim_floor();
