"""Everything between a socket and :mod:`fastapply.service`: the tritonserver process we
start, render a model repository for and drain (:mod:`.triton`, :mod:`.model_repo`,
:mod:`.processes`, :mod:`.lifecycle`), the validating HTTP front before Triton's HTTP port
(:mod:`.http`), the OpenAI / Morph / Relace compatible front (:mod:`.openai`), and the
``fastapply serve`` command (:mod:`.cli`)."""
