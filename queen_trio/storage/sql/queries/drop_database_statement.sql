-- The statement that drops a database, closing its sessions (storage/server_admin.py).
SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', :database::text)
