# Sourced by cluster/box/shape.sh and cluster/scaling_box.bash: tc's rate syntax in one place.
# rate_bps RATE: prints RATE, tc's N[k|m|g]bit (k, m, g: 10^3, 10^6, 10^9 bits), in bits per
# second; returns 1, printing nothing, if RATE is not of that form.
rate_bps() {
  [[ ${1:-} =~ ^([0-9]+)([kmg]?)bit$ ]] || return 1
  local unit=1
  case ${BASH_REMATCH[2]} in k) unit=1000 ;; m) unit=1000000 ;; g) unit=1000000000 ;; esac
  echo $((10#${BASH_REMATCH[1]} * unit))
}
