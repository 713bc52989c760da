-- A group's stored conflation policy on a queue (NULL: none stated, or no such group).
SELECT s.conflation FROM queen.subscriptions s
 WHERE s.queue_id = :queue_id AND s.consumer_group = :consumer_group
