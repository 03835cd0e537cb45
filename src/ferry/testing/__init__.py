"""Helpers for tests and demos that need real services, such as a local Apache Kafka broker."""
