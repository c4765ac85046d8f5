# The README's two commands are `make demo` and `make test`; CI runs `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch is pinned: this CPU build installs offline; any other version downloads gigabytes.
TORCH  := torch==2.13.0
DATA   ?= $(CURDIR)/data/demo
PORT   ?= 8585
# The dashboard, built from ui/ into the package (not committed; `rankwise ui` serves it).
UI_BUILT := rankwise/server/static/index.html
UI_SRC   := $(shell find ui/src ui/api-docs -type f 2>/dev/null) ui/index.html ui/report.html \
            ui/vite.config.js ui/vite.export.config.js ui/package.json

.PHONY: setup test test-fast demo lint typecheck bench clean

setup: $(VENV)/.installed $(UI_BUILT)

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# npm ci when the lock file changes; a build when the dashboard's source does.
ui/node_modules/.installed: ui/package-lock.json
	cd ui && npm ci --no-audit --no-fund
	touch $@

$(UI_BUILT): ui/node_modules/.installed $(UI_SRC)
	cd ui && npm run build

# pytest over two processes (pytest-xdist): a module's tests stay on one, so its
# module-scoped servers, jobs and browser pages are made once. XDIST= runs in one.
XDIST ?= -n 4 --dist loadfile
# The in-process half of the suite: no torchrun jobs, browsers, load runs or slow tests.
FAST  := not torchrun and not browser and not load and not slow

test: setup lint typecheck
	cd ui && npm test
	$(BIN)/python -m pytest $(XDIST)

# A few minutes: what to run while working; `make test` is the gate (CI runs it).
test-fast: setup
	$(BIN)/python -m pytest $(XDIST) -m "$(FAST)"

lint: setup
	$(BIN)/ruff check rankwise tests benchmarks examples
	$(BIN)/ruff format --check rankwise tests benchmarks examples
	cd ui && npm run lint

typecheck: setup
	$(BIN)/mypy

# The MNIST DDP tutorial under torchrun (2 processes, every rank tracked): charts, a
# gallery, the predictions table, gradient histograms from run.watch, console lines and
# the model as an artifact. Print the run, then serve the dashboard on
# http://127.0.0.1:$(PORT) until Ctrl-C.
DEMO_RUN := demo-$(shell date +%Y%m%d-%H%M%S)
demo: setup
	RANKWISE_DIR=$(DATA) $(BIN)/torchrun --nproc-per-node=2 examples/ddp_mnist_tutorial.py \
	  --epochs 5 --run-id $(DEMO_RUN) --out $(DATA)/mnist-out
	$(BIN)/rankwise runs --dir $(DATA)
	$(BIN)/rankwise show --dir $(DATA) --project mnist-tutorial $(DEMO_RUN)
	$(BIN)/rankwise ui --dir $(DATA) --port $(PORT)

bench: setup
	$(BIN)/python benchmarks/bench_log.py
	$(BIN)/python benchmarks/bench_writers.py

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache ui/node_modules rankwise/server/static
