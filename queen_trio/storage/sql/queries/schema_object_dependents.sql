-- The views and triggers that depend on the function or view :identity (and would stop a
-- DROP of it): (kind, name, identity) of each.
-- A function's identity names its arguments (schema_object_identities), which regprocedure
-- cannot parse: it is matched in the same spelling.
WITH target AS (
    SELECT CASE :kind
             WHEN 'function' THEN (
                 SELECT p.oid FROM pg_proc p
                  WHERE p.pronamespace = 'queen'::regnamespace
                    AND format('queen.%I(%s)', p.proname,
                               pg_get_function_identity_arguments(p.oid)) = :identity)
             WHEN 'view' THEN to_regclass(:identity)::oid END AS oid
)
SELECT 'trigger' AS kind, t.tgname::text AS name,
       format('%I ON %I.%I', t.tgname, n.nspname, c.relname) AS identity
  FROM target, pg_depend d
  JOIN pg_trigger t ON t.oid = d.objid
  JOIN pg_class c ON c.oid = t.tgrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE d.classid = 'pg_trigger'::regclass AND d.refobjid = target.oid AND d.deptype = 'n'
UNION
SELECT 'view', c.relname::text, format('%I.%I', n.nspname, c.relname)
  FROM target, pg_depend d
  JOIN pg_rewrite r ON r.oid = d.objid
  JOIN pg_class c ON c.oid = r.ev_class
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = target.oid AND d.deptype = 'n'
   AND r.ev_class <> target.oid
ORDER BY 1, 2
