"""How a job is configured: the one table of settings, Java's .properties form Kafka users keep them in,
config-provider references to secrets, and which topics a job reads (the subscription)."""
