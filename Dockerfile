# syntax=docker/dockerfile:1
# The semsched image: one Python package, one entry point (`semsched worker`, `semsched agents`, ...).
#   docker build -t semsched:local .        (docker-compose.yml builds it for the worker and agents)
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SEMSCHED_STATE_DIR=/var/lib/semsched

# torch: the scheduler only needs the CPU build. PyPI's default Linux wheel is a CUDA build of
# several GB; the PyTorch CPU index serves `torch==X+cpu`, which pip prefers over PyPI's `X` of the
# same release, so the image stays small. This index is used here only (images are built on a
# machine with general network access); the Makefile and CI install from PyPI alone.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

# 1) The dependencies alone, from pyproject.toml at constraints.txt's versions (torch's `==X`
#    takes the CPU index's `X+cpu`): this layer is rebuilt only when they change.
COPY pyproject.toml constraints.txt /tmp/
ENV PIP_CACHE_DIR=/var/cache/pip
RUN --mount=type=cache,target=/var/cache/pip \
    python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
 && pip install --extra-index-url "$TORCH_INDEX_URL" -c /tmp/constraints.txt -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt /tmp/pyproject.toml /tmp/constraints.txt

# 2) The package itself (not editable; the build context is bind-mounted, nothing of it is kept).
RUN --mount=type=bind,source=.,target=/src,rw \
    pip install --no-cache-dir --no-deps /src

# A non-root user that owns the state directory and the models directory in it: a new named volume
# mounted at a path the image has inherits its owner; at one it lacks, the volume's root is root's
# (docker-compose.yml mounts `models` at /var/lib/semsched/models: `train` writes there).
RUN groupadd --system --gid 10001 semsched \
 && useradd --system --uid 10001 --gid semsched --home-dir /var/lib/semsched --shell /usr/sbin/nologin semsched \
 && mkdir -p /var/lib/semsched/models \
 && chown -R semsched:semsched /var/lib/semsched
USER semsched
WORKDIR /var/lib/semsched

ENTRYPOINT ["semsched"]
CMD ["--help"]
