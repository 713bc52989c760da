-- The statement that renames a database nobody is connected to (storage/server_admin.py).
SELECT format('ALTER DATABASE %I RENAME TO %I', :database::text, :new_name::text)
