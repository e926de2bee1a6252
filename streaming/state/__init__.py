"""The state directory: its layout (every name in it), JSON documents written whole, and locks."""
