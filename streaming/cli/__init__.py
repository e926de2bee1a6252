"""The command line: kcompact run, status, dump, demo, produce, broker."""
