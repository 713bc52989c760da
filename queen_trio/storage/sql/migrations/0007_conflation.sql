-- Conflation (docs/decisions.md#conflation): a consumer group's delivery policy on a queue,
-- stored by the first pop of the group that states one (`conflation=true` or `=false`) and
-- kept until the group is deleted (its subscription row goes with it). NULL: no pop has stated
-- a policy yet, and the group is delivered every message.
ALTER TABLE queen.subscriptions ADD COLUMN conflation boolean;

-- What pop_claim tells of each claim besides its frames: the group's stored policy after
-- this pop (NULL: none stated), and how many messages the claim of this partition moved the
-- cursor past as superseded (on the partition's first row only; 0 on the others).
ALTER TYPE queen.claim_row ADD ATTRIBUTE conflation boolean;
ALTER TYPE queen.claim_row ADD ATTRIBUTE superseded bigint;
