"""The model: plain data every layer shares (triggers, run keys, runs and attempts, job states,
alerts, results, the error tree). Imports nothing but the standard library and each other."""
