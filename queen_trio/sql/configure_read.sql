SELECT id, namespace, task, explicit_options::text AS explicit_options
  FROM queen.queues WHERE id = $1 FOR UPDATE
