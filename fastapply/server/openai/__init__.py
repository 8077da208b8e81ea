"""The OpenAI / Morph / Relace compatible HTTP front: request parsing and response shapes
as pure functions (:mod:`.api`), and the HTTP server that relays them to Triton over gRPC
(:mod:`.server`)."""
