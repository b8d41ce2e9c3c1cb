#!/usr/bin/env bash
# labels: integration nosan
# fixture: requires o2_tracks_o0_1x128
# Issue 16: O2 bf16 tracks O0 (o2_baseline_1x128.sh) on cnn_bn at lr 0.1 on 1 rank(s) x 128; see
# o2_tracks_o0.bash.
source "$(dirname "$0")/o2_tracks_o0.bash"
o2_tracks_o0 1 128 bf16
finish
