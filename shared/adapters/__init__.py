"""Adapters: the only modules that talk to Google Cloud (Firestore ledger, Vertex AI, Cloud
Storage, Pub/Sub messages, alerts and their webhook), each translating the service's errors into
the project's error tree at its boundary. Clients are built lazily, once per process."""
