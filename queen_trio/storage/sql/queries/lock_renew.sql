SELECT queen.lock_renew(:name, :token, :slot, :owner, :ttl)::text
