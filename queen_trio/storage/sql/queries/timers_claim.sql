-- Claim up to :limit due timers under :token for :lease_ms (functions/timers_claim).
SELECT queue, timer_key FROM queen.timers_claim(:token::uuid, :lease_ms::integer, :limit::integer)
