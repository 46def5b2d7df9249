#!/bin/bash
# Main runs with the validation choices (layers 0,2,5; vital and Wikispeedia titles at equal shares; no sentences):
# 800 steps of 64, seed 0; the 2-layer student and the random-init control on the same recipe; three lanes.
cd "$(dirname "$0")/../../.."  # the repository root
export OMP_NUM_THREADS=1
A="--steps 800 --batch-size 64 --seed 0 --weights vital_titles=1,wikispeedia_titles=1,sentences=0"
run() { .venv/bin/python scripts/distill_embedding.py arm $A "$@" 2>&1 | tr '\r' '\n' | grep -v "it/s\]" ; }
run --name L025_t11_s800 --layers 0,2,5 --lr 2e-4 > outputs/distill_embedding/phase_b_L025.log &
run --name L05_t11_s800 --layers 0,5 --lr 2e-4 > outputs/distill_embedding/phase_b_L05.log &
run --name random3_t11_s800 --init random --layers 0,1,2 --lr 5e-4 > outputs/distill_embedding/phase_b_random3.log &
wait
