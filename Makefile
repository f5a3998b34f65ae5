# vlcp: `make install` once, then `make repro` (the study) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export DVC_NO_ANALYTICS ?= 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: install demo test repro bench lab clean gpu-check study-cost
install:  ## create .venv with the pinned toolchain and vlcp (editable)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt -c constraints.txt
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null

demo:     ## a first look: the overview study, smaller, in demo/ (the real dvc.yaml, notebooks and package; a few minutes)
	$(BIN)/python scripts/demo.py

test:     ## the test suite (CPU, two workers; ~15-17 min on 2 cores, ~27 on a day 2 x slower; the tiny dvc repro is its longest test)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal

repro:    ## the whole study: dvc repro
	$(BIN)/dvc repro

bench:    ## re-measure performance (about 2 h): throughput, eval memory, IncCLIP seed spread, the paired step-cost benchmarks (IncCLIP, TEIR, CTP), FoMo memory, then the whole dvc repro
	$(BIN)/dvc repro --force benchmarks/dvc.yaml
	$(BIN)/python benchmarks/pipeline.py

gpu-check:  ## on a GPU machine, one call (<= 9 min): samples/s, MFU, ops per step, eager vs compiled, the spine's small power row -> benchmarks/results/gpu_check.json
	$(BIN)/python benchmarks/gpu_check.py

study-cost:  ## each profile's study in FLOPs and GPU-hours -> benchmarks/results/study_cost.json and the table in docs/paper-scale.md
	$(BIN)/python benchmarks/study_cost.py

lab:      ## JupyterLab on the notebooks (extra arguments: make lab ARGS=--allow-root, needed as root)
	$(BIN)/jupyter lab notebooks $(ARGS)

clean:    ## remove generated outputs (keeps .venv and models/, where your own weights may be)
	rm -rf runs runs-ctp runs-ctp-base runs-incclip runs-cllclip runs-fomo runs-fomo-base checkpoints configs \
	    data/emoji metrics plots .live reports/*.html reports/*.ipynb reports/*_claims.json
