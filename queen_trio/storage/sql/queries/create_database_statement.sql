-- The statement that creates a database as a copy of another (storage/server_admin.py).
SELECT format('CREATE DATABASE %I TEMPLATE %I', :database::text, :template::text)
