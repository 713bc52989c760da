"""KV, locks and the transaction rider over them (docs/kv-and-locks.md)."""
