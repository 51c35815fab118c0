# tilegen: `make demo` sets up and runs the bundled example; `make test` runs the suite.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test generate check-generated fmt conformance bench fuzz-bytecode fuzz-codegen fuzz-async gpu-check clean

$(STAMP): pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[dev,oracles,mlir,cutile]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VPY) -m tilegen.demo

generate: $(STAMP)
	$(VPY) -m tilegen.generator

check-generated: $(STAMP)
	@tmp=$$(mktemp -d); \
	$(VPY) -m tilegen.generator --out $$tmp/generated || exit 1; \
	if diff -r -x __pycache__ $$tmp/generated generated >/dev/null; then echo "generated/ is in sync with spec/"; rm -rf $$tmp; \
	else diff -r -u -x __pycache__ generated $$tmp/generated | head -50; echo "generated/ drifted from spec/: run 'make generate'"; rm -rf $$tmp; exit 1; fi

# one worker per core; a test module stays on one worker (its module fixtures are built once)
PYTEST_WORKERS ?= auto
test: $(STAMP) check-generated
	$(VPY) -m pytest -p no:cacheprovider -rs -n $(PYTEST_WORKERS) --dist loadscope --durations=15 tests

fmt: $(STAMP)
	$(VPY) -m black runtime generator tilegen tests bench conformance

conformance: $(STAMP)
	$(VPY) -m tilegen.conformance

bench: $(STAMP)
	$(VPY) bench/parse_print.py
	$(VPY) bench/interp.py
	$(VPY) bench/codegen_status.py --all
	$(VPY) bench/codegen_vs_tileiras.py --all
	$(VPY) bench/compile_time.py --repeat 3

fuzz-bytecode: $(STAMP)
	$(VPY) bench/fuzz_bytecode.py --seconds 600

fuzz-codegen: $(STAMP)
	$(VPY) bench/fuzz_codegen.py --seconds 600 --shrink

fuzz-async: $(STAMP)
	$(VPY) bench/fuzz_async.py --seconds 600

clean:
	rm -rf $(VENV) build *.egg-info

# Build the GPU check payload (build/gpu-check) and print the device-tool command that runs it
gpu-check: $(STAMP)
	$(VPY) bench/gpu_check.py
