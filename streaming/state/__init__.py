"""The state directory: its layout (every name in it), the stores it can live on, and its locks."""
