# Runtime image for GPU hosts: opforge, libopforge_gpu and the evaluator with PyTorch.
# Build: docker build -t opforge .   Run: docker run --gpus all -p 8080:8080 -v opforge:/var/lib/opforge opforge
# The evaluator's sandbox (bubblewrap) makes mount, PID and network namespaces: Docker's
# default seccomp profile forbids them, so run with --security-opt seccomp=unconfined
# --cap-add SYS_ADMIN (or --privileged), or pass OPFORGE_SANDBOX=none when the container
# is the only boundary you want (the server then warns that task code runs unsandboxed).
FROM nvidia/cuda:13.0.0-devel-ubuntu24.04 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential pkg-config meson ninja-build libmicrohttpd-dev libjansson-dev \
      libcurl4-openssl-dev libsqlite3-dev libpq-dev uuid-dev libyaml-dev libcmocka-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup /build -Dcudadir=/usr/local/cuda -Dtests=disabled --prefix=/opt/opforge \
    && ninja -C /build && meson install -C /build

FROM nvidia/cuda:13.0.0-runtime-ubuntu24.04
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12t64 libjansson4 libcurl4t64 libsqlite3-0 libpq5 libuuid1 python3 python3-venv \
      cuda-nvrtc-13-0 bubblewrap util-linux \
    && rm -rf /var/lib/apt/lists/*
# torch, and what KernelBench lists for running its tasks (numpy, einops, ninja, packaging).
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir torch==2.11.0 numpy \
      einops ninja packaging
COPY --from=build /opt/opforge /opt/opforge
ENV PATH=/opt/opforge/bin:$PATH OPFORGE_PYTHON=/opt/venv/bin/python \
    OPFORGE_DATA=/var/lib/opforge OPFORGE_LISTEN=0.0.0.0:8080
EXPOSE 8080
VOLUME /var/lib/opforge
ENTRYPOINT ["opforge"]
CMD ["serve"]
