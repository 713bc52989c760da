-- Mark this transaction's cursor moves as an operator's (not counted as consumption).
SELECT set_config('queen.seek', 'on', true)
