#!/usr/bin/env bash
# labels: integration nosan
# fixture: setup o2_tracks_o0_1x128
# Issue 16: the O0 run on 1 rank(s) x 128 that o2_tracks_o0_1x128_fp16.sh and _bf16.sh compare O2
# with; see o2_tracks_o0.bash.
source "$(dirname "$0")/o2_tracks_o0.bash"
o2_baseline 1 128
finish
