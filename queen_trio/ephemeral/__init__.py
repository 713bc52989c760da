"""Ephemeral queues: in-memory request/reply rings with one owner process per database
(docs/ephemeral.md)."""
