#!/bin/bash
# Validation arms: 150 steps of 32, lr 2e-4, seed 0; two lanes.
cd "$(dirname "$0")/../../.."  # the repository root
export OMP_NUM_THREADS=1
A="--steps 150 --batch-size 32 --lr 2e-4 --seed 0"
run() { .venv/bin/python scripts/distill_embedding.py arm $A "$@" 2>&1 | grep -v "it/s\]" ; }
( run --name L025_t11_s150 --layers 0,2,5 --weights vital_titles=1,wikispeedia_titles=1,sentences=0
  run --name L012_t11_s150 --layers 0,1,2 --weights vital_titles=1,wikispeedia_titles=1,sentences=0
  run --name L025_t11s1_s150 --layers 0,2,5 --weights vital_titles=1,wikispeedia_titles=1,sentences=1 ) > outputs/distill_embedding/phase_a_lane1.log &
( run --name L135_t11_s150 --layers 1,3,5 --weights vital_titles=1,wikispeedia_titles=1,sentences=0
  run --name L025_t21_s150 --layers 0,2,5 --weights vital_titles=2.19,wikispeedia_titles=1,sentences=0 ) > outputs/distill_embedding/phase_a_lane2.log &
wait
