"""Reads of a source (and of a sink read back): a task's batch fetch by either path, ranges of many partitions
read together, the first records of a topic, and the tail past what was mirrored."""
