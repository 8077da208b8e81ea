# The fastapply images: the serving image (NVIDIA's Triton + TensorRT-LLM image plus this
# package; the default target) and the load-test image (`--target loadtest`).
#
# NOT BUILT HERE: there is no container engine on the machines this was written on, so
# this file has never been built or run. Build it on a machine with Docker and NGC access:
#   docker build -t fastapply-serve .
#   docker run --gpus all -p 8000-8002:8000-8002 -v $PWD/build:/models fastapply-serve \
#     serve --host 0.0.0.0 --runtime trtllm-engine --engine /models/current/engine \
#           --tokenizer /models/current/quantized/hf
#
# Base tag: the NGC tritonserver "<yy.mm>-trtllm-python-py3" release whose TensorRT-LLM
# is 1.2.x (the last line with trtllm-build engines, which the trtllm-engine runtime
# needs; 1.2 also has the PyTorch backend for trtllm-pytorch). How we know: Triton's
# compatibility matrix lists 25.12-trtllm-python-py3 with TensorRT-LLM 1.1.0, and
# triton-inference-server/server#8805 (2026-05-29) states that
# tritonserver:26.05-trtllm-python-py3 ships TensorRT-LLM 1.2.1. Check with
#   docker run --rm <image> python3 -c "import tensorrt_llm; print(tensorrt_llm.__version__)"
ARG BASE_IMAGE=nvcr.io/nvidia/tritonserver:26.05-trtllm-python-py3
ARG LOADTEST_BASE_IMAGE=python:3.12-slim

# -- loadtest: Locust + the fastapply client only (no torch, no Triton, no GPU) ----------
#   docker build --target loadtest -t fastapply-loadtest .
#   docker run --rm fastapply-loadtest loadtest --url <host>:8001 --users 8 --duration 60s
# The chart's `helm test` pod runs this image (values `loadtest.image`). It is declared
# before the serving stage so that a plain `docker build .` still builds the serving image
# (the last stage); BuildKit builds only the stages the chosen target needs.
FROM ${LOADTEST_BASE_IMAGE} AS loadtest
ENV PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1
WORKDIR /opt/fastapply/src
# The package's sources (.dockerignore lets nothing else into the build context).
COPY . ./
# The `loadtest` extra is Locust + tritonclient[grpc]; the core package needs nothing.
RUN python3 -m pip install ".[loadtest]" \
 && python3 -c "import fastapply.loadtest.cli, fastapply.client, locust" \
 && ! python3 -c "import torch" 2>/dev/null \
 && rm -rf /opt/fastapply/src/build
RUN useradd --uid 1000 --create-home --shell /bin/bash fastapply
ENV HOME=/tmp
USER 1000
WORKDIR /tmp
ENTRYPOINT ["fastapply"]
CMD ["loadtest", "--help"]

# -- serve (the default target): NVIDIA's Triton + TensorRT-LLM image plus fastapply -----
FROM ${BASE_IMAGE} AS serve

# The base image's Python is the system one; its pip may refuse to touch it (PEP 668).
ENV PIP_BREAK_SYSTEM_PACKAGES=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1

WORKDIR /opt/fastapply/src
COPY pyproject.toml README.md NOTICE* ./
COPY fastapply ./fastapply
COPY client ./client
COPY engine_build ./engine_build
COPY loadtest ./loadtest
COPY model_repository ./model_repository

# Install fastapply WITHOUT letting pip touch the base image's torch, tensorrt_llm,
# transformers or numpy: the `serve` extra would pull transformers 5 (TensorRT-LLM 1.2 pins
# its own) and nvidia-pytriton (a second tritonserver we do not need here). So:
#  1. pin every package already installed (constraints file from pip freeze);
#  2. install fastapply itself with --no-deps;
#  3. install only the client dependency, the judge's (`judge`: LightGBM, tree-sitter and
#     its grammar wheels; the default policy reads them) and the build Job's tools
#     (`build-trtllm`: the image's own transformers/modelopt pins; a mismatch fails here),
#     under those pins.
RUN python3 -m pip freeze --exclude-editable | grep -v ' @ ' > /tmp/base-constraints.txt \
 && python3 -m pip install --no-deps . \
 && python3 -m pip install --constraint /tmp/base-constraints.txt "tritonclient[grpc]>=2.50" \
 && python3 -m pip install --constraint /tmp/base-constraints.txt ".[judge]" \
 && python3 -m pip install --constraint /tmp/base-constraints.txt ".[build-trtllm]" \
 && python3 -c "import tensorrt_llm, fastapply.service, fastapply.server.model_repo; \
from fastapply.judge import Judge; Judge.load()" \
 && rm -rf /opt/fastapply/src/build

# Run as uid 1000. The Triton base images already have such a user (triton-server);
# create one only where it is missing.
RUN (id -u 1000 >/dev/null 2>&1 || useradd --uid 1000 --create-home --shell /bin/bash fastapply) \
 && mkdir -p /opt/fastapply/cache /models \
 && chown -R 1000:1000 /opt/fastapply/cache /models
ENV FASTAPPLY_CACHE=/opt/fastapply/cache \
    HF_HOME=/opt/fastapply/cache/hf
USER 1000
WORKDIR /opt/fastapply

# HTTP, gRPC, metrics
EXPOSE 8000 8001 8002
ENTRYPOINT ["fastapply"]
CMD ["serve", "--host", "0.0.0.0"]
