"""Decoding what arrives: CloudEvents into triggers, job-state hints, routing a trigger to a
route, dataset manifests. Pure: trusts nothing it is given and imports no cloud client, so an
event that matches no route costs only this layer."""
