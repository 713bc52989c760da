-- Which kinds of consumer read the queues (all, or those named): queue mode, named groups.
SELECT coalesce(bool_or(s.consumer_group = '__QUEUE_MODE__'), false) AS has_queue_mode,
       count(DISTINCT s.consumer_group) FILTER (WHERE s.consumer_group <> '__QUEUE_MODE__')
           AS bus_groups
  FROM queen.subscriptions s
 WHERE :queue_ids::uuid[] IS NULL OR s.queue_id = ANY (:queue_ids::uuid[])
