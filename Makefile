# The two set-up commands (README): `make repro` runs the pipeline on the default data,
# `make test` runs the test suite. Both create .venv on first use. After a run, `make readme`
# rewrites the README's picture and figures from it.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BANK_STAMP := $(VENV)/.installed-bank-stamp
TEST_STAMP := $(VENV)/.installed-test-stamp
export PATH := $(abspath $(BIN)):$(PATH)
# Where PYTHONDONTWRITEBYTECODE is set (as on our CI machines) no .pyc is ever written, and every
# stage process compiles torch, diffusers and peft from source again on import; let the first
# import cache them, cheaper than uv's --compile-bytecode of the whole venv (docs/benchmarks.md).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install install-bank dvc.yaml repro readme snakemake sweep test test-fast chromium tesseract bench bank base base-window wheels label-reader digitize-reader cluster-up cluster-down clean

# `make install`: the project as a user installs it, all that `make repro` needs. `make
# install-bank` adds pyproject's `bank` extra, the libraries only the base's bank draws with (the
# bank's targets below install it); the test stamp, the `test` extra (the suite's tools and the
# bank's libraries). Each stamp marks what its install holds, so a wider one stamps the narrower.
install: $(STAMP)
install-bank: $(BANK_STAMP)

# uv installs the same pins as pip would, but fetches in parallel, so a fresh .venv is made far
# sooner (docs/benchmarks.md). pip's find-links, where a local CPU torch wheel may lie, are
# passed on (uv reads no pip config); pip alone is the fallback when uv cannot be had.
# $(call install_project,EXTRAS,NARROWER STAMPS)
UV_VERSION ?= 0.13.9
FIND_LINKS ?= $(PIP_FIND_LINKS)
define install_project
	$(PYTHON) -m venv $(VENV)
	{ $(BIN)/python -m pip install -q uv==$(UV_VERSION) && $(BIN)/uv pip install -q \
	    --python $(BIN)/python $(if $(FIND_LINKS),--find-links $(FIND_LINKS)) \
	    -c requirements.lock -e '.$(1)'; } \
	  || $(BIN)/python -m pip install -q -c requirements.lock -e '.$(1)'
	touch $@ $(2)
endef
$(STAMP): pyproject.toml requirements.lock
	$(call install_project,,)
$(BANK_STAMP): pyproject.toml requirements.lock
	$(call install_project,[bank],$(STAMP))
$(TEST_STAMP): pyproject.toml requirements.lock
	$(call install_project,[test],$(STAMP) $(BANK_STAMP))

# `make repro`: `dvc repro`, timed: where it changed metrics/eval.json, the wall time, the commit
# and the machine go to .linefuse/run.json (git-ignored) for `make readme`. REPRO_FLAGS=--force
# reruns every stage, so that the time is the whole run's.
REPRO_FLAGS ?=
repro: $(STAMP) tesseract
	$(BIN)/python -m linefuse.report.run_record $(BIN)/dvc repro $(REPRO_FLAGS)

# `make readme`: after `make repro`, rewrite README.md's picture (docs/images/before_after.png, from
# reports/samples.png) and its figures (the blocks between <!-- picture: --> and <!-- run: -->
# markers) from that run's outputs, with its recorded time; commit them with the run's metrics.
readme: $(STAMP)
	$(BIN)/python -m linefuse.report.readme

# `make dvc.yaml`: write dvc.yaml and the Snakefile from the stage graph declared in
# src/linefuse/pipeline.py; a test fails while either committed file is stale.
dvc.yaml: $(STAMP)
	$(BIN)/python -m linefuse.pipeline

# `make base`: remake the base LineFuse ships (src/linefuse/zoo/<base.name>, its model card says how
# it was made) from params.yaml's base block; on the GPU if one is visible; resumes from
# .linefuse/state/base after a stop. Commit the folder it writes.
base: bank
	$(BIN)/linefuse base

# `make base-window MINUTES=8 OUT=DIR`: one window of the base's training on a lent GPU
# (linefuse base-window, docs/model_zoo.md). It resumes the stable state in STATE where given,
# else the state the last call returned: the copy a window on this machine left in WINDOW_CHAIN
# (a call on the warm machine), else the folder of the last call's files carried in as
# WINDOW_CARRIED, else the base's committed state (workflow/base_windows/<base.name>). It trains
# for MINUTES of wall clock counted from this target's start, writes the weights it offers, the
# state (in files of at most 15 MiB), the compiled kernels and its record to OUT, and copies OUT
# to WINDOW_CHAIN for the next call; `linefuse base-land OUT` scores them back here. With the
# libraries packed in .whl/site.tar.xz (make wheels) it runs on the machine's own python3 (a GPU
# image's, with torch), adding only those; else on the project's venv. TRACE=STEPS profiles
# that many steps and times a twice-as-wide UNet's step, into the record (base/window_trace.py).
MINUTES ?= 8
OUT ?= .linefuse/window
WINDOW_PARAMS ?= params.yaml
STATE ?=
WINDOW_CHAIN ?= /tmp/linefuse-window-chain
WINDOW_CARRIED ?= .linefuse/window-carried
TRACE ?= 0
WINDOW_SITE ?= /tmp/linefuse-site
base-window:
	@started=$$(date +%s.%N); \
	if [ -f .whl/site.tar.xz ]; then \
	  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" \
	    .whl/site.tar.xz $(WINDOW_SITE) || exit 1; \
	  run="env PYTHONPATH=src:$(WINDOW_SITE) python3"; \
	else $(MAKE) -s install-bank || exit 1; run=$(BIN)/python; fi; \
	state="$(STATE)"; \
	for last in $(WINDOW_CHAIN) $(WINDOW_CARRIED); do \
	  if [ -z "$$state" ] && [ -f $$last/record.json ]; then state=$$last; fi; done; \
	echo "base-window: resuming $${state:-the base's committed state}"; \
	$$run -m linefuse.cli --params $(WINDOW_PARAMS) base-window --minutes $(MINUTES) \
	  $${state:+--state $$state} --trace $(TRACE) --out $(OUT) --started-at $$started \
	  && rm -rf $(WINDOW_CHAIN) && cp -r $(OUT) $(WINDOW_CHAIN)

# `make wheels`: what a GPU image's python3 (3.12, with torch, accelerate, numpy, matplotlib,
# pandas, scipy, statsmodels, scikit-image ...) lacks for a base window, at requirements.lock's
# pins, installed for that python into one xz-packed folder, .whl/site.tar.xz (git-ignored),
# carried to the GPU machine with the working tree: every library the base's bank may draw with
# (base.libraries: Lets-Plot with pypng and palettable, ReportLab and PDFium; plotnine and
# mizani) draws there too. Packed whole, the 34 MB of wheels are 21 MB (xz finds what files
# share; a wheel's zip packs each file alone), room the base's state needs in the 64 MiB a
# call carries; vl-convert's 33 MB wheel does not travel.
GPU_PYTHON ?= 3.12
GPU_WHEELS := diffusers peft pydantic pydantic_core annotated-types typing-inspection \
  typing_extensions lmdb kornia kornia_rs importlib_metadata zipp plotnine mizani \
  lets-plot pypng palettable reportlab charset-normalizer pypdfium2
wheels:
	rm -rf .whl && $(PYTHON) -m pip install -q --no-deps --no-compile --only-binary=:all: \
	  --python-version $(GPU_PYTHON) --implementation cp --platform manylinux_2_28_x86_64 \
	  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --target .whl/site \
	  $$(for name in $(GPU_WHEELS); do grep -i "^$$name==" requirements.lock; done)
	$(PYTHON) -c "import sys, tarfile; tarfile.open(sys.argv[1], 'w:xz', preset=9).add(sys.argv[2], '.')" \
	  .whl/site.tar.xz .whl/site && rm -rf .whl/site

# `make label-reader` and `make digitize-reader`: remake the tick-label readers LineFuse ships
# (src/linefuse/zoo/<name>: weights, scores.json and a model card) from params.yaml's
# label_reader or digitize_reader block, its reader and then each of its voters, on every core;
# READER=<name> remakes that one alone. Commit the folders it writes.
label-reader digitize-reader: $(BANK_STAMP)
	$(BIN)/linefuse $@ $(if $(READER),--reader $(READER))

# `make bank`: draw the base's sharp charts (params.yaml base.bank) once, on all cores, into an LMDB
# env under .linefuse/bank/<fingerprint of the chart params>; a rerun continues after a stop.
bank: $(BANK_STAMP)
	$(BIN)/linefuse bank

snakemake: $(STAMP) tesseract
	$(BIN)/snakemake --cores 2

# `make sweep`: queue one DVC experiment per LoRA rank x curriculum on/off (train.ordered), run
# them one after another, then list each one's mean PSNR gain (metrics/eval.json), overall with
# its interval and per domain. Override the grid on the command line:
# make sweep SWEEP_RANKS="4 8 16" SWEEP_ORDERED=true
SWEEP_RANKS ?= 4 16
SWEEP_ORDERED ?= true false
SWEEP_JOBS ?= 1
sweep: $(STAMP)
	@for rank in $(SWEEP_RANKS); do for ordered in $(SWEEP_ORDERED); do \
	  curriculum=$$([ $$ordered = true ] && echo curriculum || echo mixed); \
	  $(BIN)/dvc exp run --queue -n rank$$rank-$$curriculum -S train.lora.rank=$$rank \
	    -S train.lora.alpha=$$rank -S train.ordered=$$ordered || exit 1; done; done
	$(BIN)/dvc queue start --jobs $(SWEEP_JOBS)
	@while $(BIN)/dvc queue status | grep -qE 'Queued|Running'; do sleep 10; done
	@! $(BIN)/dvc queue status | grep -q Failed || { $(BIN)/dvc queue status; \
	  echo "make sweep: an experiment failed; see dvc queue logs NAME"; exit 1; }
	$(BIN)/dvc exp show --no-pager --md --drop '.*' \
	  --keep '^(Experiment|train\.lora\.rank|train\.ordered|gain_db(_low|_high)?|domain_gain_db\..*)$$'

# lint and format (pyproject's [tool.ruff]) before the suite; the suite runs `snakemake --lint`.
# Tesseract and Chromium are installed first, so the tests that read tick labels or drive the
# browser must run, not skip; so must the read-only output trials (they mount with unshare).
# The tests run on pytest-xdist workers, one more than the cores (PYTEST_WORKERS=0: in one
# process): many tests wait on a stage's process, SLURM's polls or a paced restore, and the extra
# worker uses those waits. They are handed out one at a time in conftest's order, the slowest
# first; the engines' builds and the tiny project are made once and shared (tests/conftest.py).
# The slowest 20 tests and fixtures are listed at the end: where the suite's minutes go.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
PYTEST := LINEFUSE_REQUIRE_TESSERACT=1 LINEFUSE_REQUIRE_CHROMIUM=1 LINEFUSE_REQUIRE_MOUNTS=1 \
  $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) \
  --dist load --maxschedchunk 1 --durations=20
test: $(TEST_STAMP) chromium tesseract
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(PYTEST)

# `make test-fast`: the same checks without the tests marked slow (every test that builds or runs a
# pipeline, or trains: tests/conftest.py marks them), a quick loop beside the whole suite (its
# time: docs/benchmarks.md).
test-fast: $(TEST_STAMP) chromium tesseract
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(PYTEST) -m "not slow"

# `make cluster-up` / `make cluster-down`: a one-node SLURM cluster on this machine (root; Debian's
# slurm and munge, installed when missing) to try `snakemake --profile workflow/profiles/slurm`
# for real (docs/pipeline.md, "Clusters and remotes"); the suite starts and stops its own.
cluster-up:
	workflow/slurm/local_cluster.sh start
cluster-down:
	workflow/slurm/local_cluster.sh stop

# tests/report/test_report.py opens reports/index.html in headless Chromium: Debian's package, installed
# when missing, with sudo when not root.
chromium:
	@command -v chromium >/dev/null 2>&1 || { echo "make: installing chromium for tests/report/test_report.py"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# evaluate reads the charts' tick labels with Tesseract (pytesseract runs the program): Debian's
# package, installed when missing, with sudo when not root. Without it evaluate still runs, and
# the labels' error rates are null.
tesseract:
	@command -v tesseract >/dev/null 2>&1 || { echo "make: installing tesseract-ocr for evaluate"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr; }

bench: $(STAMP)
	$(BIN)/python benchmarks/loader.py
	$(BIN)/python benchmarks/train.py
	$(BIN)/python benchmarks/precision.py
	$(BIN)/python benchmarks/curve_reader.py
	$(BIN)/python benchmarks/baselines.py
	$(BIN)/python benchmarks/scoring.py

clean:
	rm -rf data/source data/index data/shards data/embeddings models logs metrics .snakemake .linefuse
