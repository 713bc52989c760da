"""Streams: the server half of the official clients' streaming SDK (docs/streams.md).

`parse` reads and bounds the three routes' bodies; `service` runs them against PostgreSQL.
"""
