# `make demo` and `make test` set everything up on a fresh machine (a .venv beside this file).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-zoo test-models test-published test-sweep perf bench install install-published browser clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first, pinned: the CPU build on these machines (a plain `torch` requirement pulls CUDA wheels).
$(STAMP): setup.py | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# the published benchmark table's model packages (pybuda.tools.published), for its slow tier only: timm and pytorchcv
# beside the pinned torch (so pip picks the torchvision built for it), and the yolov5 package without its training
# and logging dependencies (ultralytics pulls CUDA torch and an old huggingface-hub), only what its model code imports
PUBLISHED_STAMP := $(VENV)/.published
$(PUBLISHED_STAMP): $(STAMP)
	$(PY) -m pip install --quiet torch==2.13.0 timm==1.0.31 pytorchcv==0.0.74 opencv-python-headless==5.0.0.93 \
	  psutil seaborn "setuptools<81"
	$(PY) -m pip install --quiet --no-deps yolov5==7.0.14 ultralytics==8.4.190
	touch $(PUBLISHED_STAMP)

install-published: $(PUBLISHED_STAMP)

demo: $(STAMP)
	$(PY) -m pybuda.tools.demo

# Debian's chromium for the report's browser tests (tests/test_report.py), installed with apt as root; where it
# cannot be, the browser tests skip and say why
browser:
	@command -v chromium >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	    >/dev/null 2>&1; } || \
	  echo "chromium could not be installed (apt needs root and the Debian mirror): the browser tests will skip"

# the layered import contract (.importlinter) first, then the tests
test: $(STAMP) browser
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -n 2 tests

# the full-size model zoo (BERT-base/large, GPT-2, ViT-B/16 on e150 and n150): slow, not part of `make test`
test-zoo: $(STAMP)
	$(PY) -m pytest -q -m zoo tests/test_zoo_full.py

# the models users bring (DistilBERT, Llama, ConvNeXt, SegFormer, ...: small configs, random weights)
test-models: $(STAMP)
	$(PY) -m pytest -q -m models tests/test_zoo_models.py

# the published benchmark table: its 13 models at microbatch 1 against PyTorch, its 26 configurations compiled
test-published: $(PUBLISHED_STAMP)
	$(PY) -m pytest -q -m published tests/test_published.py

# the fast-tier zoo x 3 microbatches x 2 formats swept on Ray on this machine, and a sweep through a started Ray head
# node (tests/test_sweep.py)
test-sweep: $(STAMP)
	$(PY) -m pytest -q -m sweep tests/test_sweep.py

# the performance regression runner against benchmarks/perf_baseline.json (README)
perf: $(STAMP)
	$(PY) -m pybuda.tools.perf_regression

bench: $(STAMP)
	$(PY) benchmarks/compile_time.py

clean:
	rm -rf $(VENV) pybuda_out .pytest_cache
