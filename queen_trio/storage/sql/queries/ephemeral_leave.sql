-- A broker process that stops.
DELETE FROM queen.ephemeral_members WHERE member_id = :member_id
