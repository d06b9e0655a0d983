"""A toy shop backend (fixture of the request_id scenario)."""
