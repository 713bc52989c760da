-- The statement that creates a database as a copy of another (storage/server_admin.py);
-- :strategy NULL: the server's default (WAL_LOG), else STRATEGY :strategy (PostgreSQL 15+).
SELECT format('CREATE DATABASE %I TEMPLATE %I', :database::text, :template::text)
       || CASE WHEN :strategy::text IS NULL THEN ''
               ELSE format(' STRATEGY %I', :strategy::text) END
