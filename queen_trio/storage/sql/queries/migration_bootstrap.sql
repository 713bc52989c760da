-- The ledgers every broker version reads before anything else: which migrations ran, and
-- which functions, views and triggers are installed (storage/schema.py).
CREATE SCHEMA IF NOT EXISTS queen;
CREATE TABLE IF NOT EXISTS queen.schema_migrations (
    version    text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
-- One row per installed object: what DROP names it by, and the digest of its file's text.
CREATE TABLE IF NOT EXISTS queen.schema_objects (
    name         text PRIMARY KEY,
    kind         text NOT NULL,
    identity     text NOT NULL,
    digest       text NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- The installed set as a whole: its generation (objects.txt) and digest.
CREATE TABLE IF NOT EXISTS queen.schema_object_set (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    generation   integer NOT NULL,
    digest       text NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
