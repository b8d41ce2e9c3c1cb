#!/usr/bin/env bash
# labels: integration nosan
# fixture: requires o2_tracks_o0_2x64
# Issue 16: O2 fp16 tracks O0 (o2_baseline_2x64.sh) on cnn_bn at lr 0.1 on 2 rank(s) x 64; see
# o2_tracks_o0.bash.
source "$(dirname "$0")/o2_tracks_o0.bash"
o2_tracks_o0 2 64 fp16
finish
