"""The two headers every sink record carries: its source offset and the cluster it came from."""
