-- Which of these names no queue has: a pop named a queue that does not exist, or it was
-- deleted since (the sampler drops their activity counts).
SELECT u.name
  FROM unnest(:names::text[]) AS u(name)
 WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.name = u.name)
