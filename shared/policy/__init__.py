"""Policy: the project's decisions as pure functions over the model, the config and protos
(rendering a job, machine tables, failure classification, retry decisions, retry admission, the
reconcile plan, timing). No I/O, no Google Cloud client, no adapter."""
