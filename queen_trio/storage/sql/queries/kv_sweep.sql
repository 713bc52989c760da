SELECT queen.kv_sweep(:now, :batch)
