-- For the rest of this transaction, plan each statement for the values it is given. A
-- prepared statement switches to a generic plan after its fifth run; for a catch-all filter
-- (":x IS NULL OR col = :x", LIMIT :limit) that plan can be tens of times slower.
SET LOCAL plan_cache_mode = force_custom_plan
