SELECT * FROM queen.extend_lease(:lease_id, :seconds)
