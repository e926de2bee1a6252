"""Keeping a job's secrets and data private: redaction of credentials wherever settings are shown, and the
certificates of the brokers the project starts."""
