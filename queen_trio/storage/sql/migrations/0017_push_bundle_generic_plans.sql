-- queen.push_bundle runs its statements on generic plans (issue 12: less PostgreSQL work per
-- message). PL/pgSQL caches a plan per statement, but under the default plan_cache_mode the
-- planner compared the generic plan of each statement (which guesses ten rows for every
-- unnest of the arrays) with a custom plan for one segment's values, found the custom one
-- cheaper, and so planned every statement again on every call. Every statement of the
-- function looks rows up by keys (partition id, transaction id, queue id) through an index
-- whatever the values, so the generic plan is as good and is planned once per connection:
-- bench/push_bundle.py measured about 920 µs of backend CPU per batch-1 call before this
-- and about 600 after.
ALTER FUNCTION queen.push_bundle(text[], text[], boolean[], boolean[], integer[], bytea[],
                                 integer[], text[], boolean)
    SET plan_cache_mode = force_generic_plan;
