SELECT EXISTS (SELECT 1 FROM queen.hidden_counts)
