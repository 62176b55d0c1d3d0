"""Handlers: what the Cloud Functions call (dispatch an event, handle a job-state hint, run a
reconcile tick) and the owed actions they share. They compose the pure layers with the adapters."""
