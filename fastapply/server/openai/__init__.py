"""The OpenAI / Morph / Relace compatible HTTP front: request parsing (:mod:`.api`, with
the message's tags in :mod:`.tags`), response shapes and streamed chunks (:mod:`.responses`)
and errors (:mod:`.errors`) as pure functions, and the HTTP server that relays them to
Triton over gRPC (:mod:`.server`)."""
