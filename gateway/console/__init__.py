"""The web console at ``/console``: server-rendered pages over the admin API's data."""
