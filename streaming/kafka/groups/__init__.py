"""Consumer groups across the mirror: their offsets synced to the sink, and where they stand after a switch."""
