"""Stage 1: bytes on disk -> one columnar event store (input, caps, decode, repair, times, events)."""
