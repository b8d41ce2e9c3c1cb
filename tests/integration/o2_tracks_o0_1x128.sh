#!/usr/bin/env bash
# labels: integration nosan
# Issue 16: O2 (fp16, bf16) tracks O0 on cnn_bn at lr 0.1 on 1 rank x 128; see o2_tracks_o0.bash.
source "$(dirname "$0")/o2_tracks_o0.bash"
o2_tracks_o0 1 128
finish
