"""Edit corpora built from the git history of local repositories.

``fastapply data build`` walks non-merge commits of local git directories and writes
edit records in the schema of the development corpus (``id``, ``repo``, ``commit``,
``path``, ``language``, ``original``, ``updated``, ``lazy_snippet``, ``search_replace``,
``udiff``, plus ``license``); ``fastapply data split`` splits such a file by repository
into a tune set and a validation set. Nothing here touches the network.
"""
