"""Benchmarks: commands that print a table and then one JSON object as their last line.

Run ``python -m fastapply.bench --help``. Never timed tests: targets live here and the
results, with their command lines, in ``docs/benchmarks.md``.
"""
