-- Every object of the schema called :name of :kind, as DROP names it: a function with its
-- argument types (each overload), a view, a trigger with its table.
SELECT format('queen.%I(%s)', p.proname, pg_get_function_identity_arguments(p.oid))
  FROM pg_proc p
 WHERE :kind = 'function' AND p.proname = :name AND p.pronamespace = 'queen'::regnamespace
UNION ALL
SELECT format('queen.%I', c.relname)
  FROM pg_class c
 WHERE :kind = 'view' AND c.relname = :name AND c.relkind = 'v'
   AND c.relnamespace = 'queen'::regnamespace
UNION ALL
SELECT format('%I ON %I.%I', t.tgname, n.nspname, c.relname)
  FROM pg_trigger t
  JOIN pg_class c ON c.oid = t.tgrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE :kind = 'trigger' AND t.tgname = :name AND NOT t.tgisinternal
ORDER BY 1
