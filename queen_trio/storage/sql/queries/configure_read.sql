SELECT id, namespace, task, explicit_options::text AS explicit_options
  FROM queen.queues WHERE id = :queue_id FOR UPDATE
