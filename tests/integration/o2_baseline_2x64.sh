#!/usr/bin/env bash
# labels: integration nosan
# fixture: setup o2_tracks_o0_2x64
# Issue 16: the O0 run on 2 rank(s) x 64 that o2_tracks_o0_2x64_fp16.sh and _bf16.sh compare O2
# with; see o2_tracks_o0.bash.
source "$(dirname "$0")/o2_tracks_o0.bash"
o2_baseline 2 64
finish
