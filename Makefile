# The two commands of the README: `make demo` (the main job, end to end) and `make test`
# (the whole suite; .ci/run calls it). Both install what they need: a venv with the
# package and its dependencies at the versions of constraints.txt, and the Apache Kafka
# jars from Maven Central.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
SEMSCHED := $(VENV)/bin/semsched
# seconds between two tries of the whole pip install
PIP_RETRY_PAUSE ?= 30

.PHONY: demo test install kafka-jars lint lock clean

# A venv whose python has no pip is made again: `python3 -m venv` leaves one behind when ensurepip
# is missing (Debian without python3-venv), and every later make failed on "No module named pip".
$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 13) else "semsched needs Python 3.11 or 3.12 (this $(PYTHON) is %d.%d): make ... PYTHON=python3.11" % sys.version_info[:2])'
	$(PY) -m pip --version >/dev/null 2>&1 || $(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install -q --retries 10 --upgrade pip
	@# torch's CUDA wheels are ~3 GB from PyPI; a download cut off mid-wheel (seen in CI) is resumed
	@# by pip, and the whole install is tried again after a pause (finished wheels come from the cache)
	@for attempt in 1 2 3 4; do \
	  $(PY) -m pip install -q --retries 10 --resume-retries 20 -c constraints.txt -e '.[dev]' && break; \
	  [ $$attempt -lt 4 ] || { echo "pip install failed 4 times: see the errors above" >&2; exit 1; }; \
	  echo "pip install failed (attempt $$attempt of 4); trying again in $(PIP_RETRY_PAUSE) s" >&2; sleep $(PIP_RETRY_PAUSE); \
	done
	touch $@

install: $(VENV)/.installed

kafka-jars: install
	$(SEMSCHED) kafka jars

demo: kafka-jars  # options for `semsched demo` go in ARGS: make demo ARGS="--policy learned --inference triton"
	$(SEMSCHED) demo $(ARGS)

test: kafka-jars
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest -q -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# constraints.txt again from pyproject.toml's ranges alone, resolved in a throwaway venv (then run `make test`)
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q --upgrade pip && .lock-venv/bin/pip install -q -e '.[dev]'
	{ grep '^#' constraints.txt; .lock-venv/bin/pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt && rm -rf .lock-venv

clean:
	rm -rf .state build *.egg-info
