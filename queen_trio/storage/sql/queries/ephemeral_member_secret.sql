-- A forward's sender: a member, and its secret.
SELECT secret FROM queen.ephemeral_members WHERE member_id = :member_id
