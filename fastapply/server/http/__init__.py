"""The HTTP guard in front of Triton's HTTP port: generate requests checked
(:mod:`.checks`), ``generate`` sent upstream as a stream (:mod:`.generate`) over a small
HTTP/1.1 client (:mod:`.upstream`), the rest relayed; :mod:`.guard` is the application."""
