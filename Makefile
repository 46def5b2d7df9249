# Two commands for a fresh machine:  `make demo` (set up + run the main job) and `make test` (set up + full suite).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# No bytecode is compiled at set-up (uv compiles none; pip runs with --no-compile): Python writes it on first import,
# for the modules this project imports (about a quarter of the 19,500 installed files), instead of compileall's every
# file (45 s of a fresh set-up on two cores). For that it must be allowed to write it: with PYTHONDONTWRITEBYTECODE
# set, every process would compile each module it imports again.
unexport PYTHONDONTWRITEBYTECODE
KERNEL := wikigat
# uv installs the pinned packages in parallel (scripts/install_packages.py; pip if uv fails); INSTALLER=pip: pip only.
INSTALLER ?= uv
SIZE   ?= demo
DEVICE ?= cpu

.PHONY: setup demo test lint format unit quick nbval lab batch bench clean-outputs

$(STAMP): requirements.txt requirements-nodeps.txt constraints.txt pyproject.toml scripts/install_packages.py
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11 ...'"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python scripts/install_packages.py --with $(INSTALLER)
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (wikigat)"
	touch $(STAMP)

setup: $(STAMP)

## Command 1: set up and run every numbered notebook on the embedded offline default.
demo: setup
	$(BIN)/python -m lib.run.runner --size $(SIZE) --device $(DEVICE)

## Command 2: set up and run the whole suite (unit/integration tests + nbval over the notebooks).
# Two workers, one thread each: one runs the notebooks in order (conftest.py groups them), the other the rest.
WORKERS ?= 2
test: setup lint
	@scripts/ensure_chromium.sh
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest tests notebooks -n $(WORKERS) \
	  --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider

## The code's formatting and lint rules (pyproject.toml, [tool.ruff]); `make format` applies them.
lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

unit: setup
	$(BIN)/python -m pytest tests

# The inner loop: unit tests without the ones marked slow (notebooks through the runner, torchrun, kills); make test
# still runs everything.
quick: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest tests -m "not slow" -n $(WORKERS)

nbval: setup
	$(BIN)/python -m pytest notebooks --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

# Jupyter refuses to start as root (common in containers) unless told so explicitly.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
lab: setup
	$(BIN)/jupyter lab --notebook-dir=. $(ALLOW_ROOT)

## Batch grid: one run per size profile (and device), then outputs/summary.{md,csv,html}.
GRID ?= demo tiny
batch: setup
	$(BIN)/python -m lib.run.runner $(foreach s,$(GRID),--size $(s)) --device $(DEVICE)

bench: setup
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean-outputs:
	rm -rf outputs/*/
