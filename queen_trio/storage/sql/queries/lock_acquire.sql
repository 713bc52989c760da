SELECT queen.lock_acquire(:name, :owner, :ttl, :lim)::text
