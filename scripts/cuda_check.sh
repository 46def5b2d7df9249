#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one go (a few minutes on one H200): the CUDA-only tests, the GatModel step
# benchmark on the GPU (eager and captured as a CUDA graph, against PyG's GATConv), and notebooks 03, 03b (with every
# decoder of params/beyond.yaml) and 04 under params/cuda.yaml on a run folder whose notebooks 01 and 02 ran on the CPU
# (the runner refuses that mix, hence papermill directly).
#
#   python -m lib.run.runner --params params/beyond.yaml params/cpu.yaml --run-name gpu_check --notebooks 01 02
#   OUT=outputs/gpu_check_out bash scripts/cuda_check.sh outputs/gpu_check
#
# Writes to $OUT: card.txt, pytest_cuda.txt, bench_model_cuda.txt, the executed notebooks, the run's metrics.json and
# log.txt (everything printed).
set -uo pipefail
RUN=$(realpath "${1:?usage: cuda_check.sh RUN_FOLDER (notebooks 01 and 02 done)}")
PY=${PYTHON:-python3}
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # lib importable without an install
exec > >(tee "$OUT/log.txt") 2>&1

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  $PY -c "import sys, torch, torch_geometric as g, transformers as t, sentence_transformers as s, papermill as p
print(sys.version); print('torch', torch.__version__, 'pyg', g.__version__, 'transformers', t.__version__,
      'sentence-transformers', s.__version__, 'papermill', p.__version__)"
  nproc
  git rev-parse HEAD 2>/dev/null || echo "commit: not a git checkout"
} > "$OUT/card.txt" 2>&1
cat "$OUT/card.txt"

if [ "${TESTS:-1}" = 1 ]; then
  echo "== CUDA tests"
  $PY -m pytest -q -p no:cacheprovider tests/test_cuda_graph.py tests/test_decoders.py tests/test_training.py \
    -k "cuda or autocast or graph" 2>&1 | tee "$OUT/pytest_cuda.txt"
fi

echo "== GatModel step on the GPU"
$PY benchmarks/bench_model.py --device cuda --repeats 20 --threads "$(nproc)" 2>&1 | tee "$OUT/bench_model_cuda.txt"

for nb in 03_train_gat 03b_beyond_seed 04_aauc_analysis; do
  echo "== notebook $nb (params/cuda.yaml, one seed)"
  start=$(date +%s)
  $PY -m papermill "notebooks/$nb.ipynb" "$OUT/$nb.ipynb" -f params/beyond.yaml -f params/cuda.yaml \
    -p run_dir "$RUN" -p n_seeds 1 -k "${KERNEL:-python3}" --cwd notebooks --log-level WARNING || echo "notebook $nb FAILED"
  echo "$nb took $(( $(date +%s) - start )) s"
done
cp "$RUN/metrics.json" "$OUT/metrics.json" 2>/dev/null
