"""Locust load test of a fastapply server: ``locust -f <this file> --host HOST:PORT``.

Each user keeps one gRPC stream to the server (Triton's gRPC port) and sends edits from a
JSONL (``--fa-data``, default: the shipped examples), mixing snippet formats
(``--fa-formats``) and file sizes, with an optional think time (``--fa-think-time``).
All the plumbing lives in :mod:`fastapply.loadtest.users`; ``fastapply loadtest`` runs
this file headless under a hard time bound and summarises it.
"""

from __future__ import annotations

from locust import task

from fastapply.loadtest.users import FastApplyBaseUser


class FastApplyUser(FastApplyBaseUser):
    """Sends one edit after another, picked at random over formats and file sizes."""

    @task
    def merge_edit(self) -> None:
        self.merge(self.workload.pick())
