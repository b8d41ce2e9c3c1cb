# One row of start-experiment.txt from a run's directory (ab.sh): with a bench-comm run's
# shim times, bench-comm's MPI-level median; with a training run's, comm_last (step records),
# MPI's time on the rank that entered last, the step time and the late starts per rank.
import json, os, statistics as st, sys

d, label = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ''
shim = {r: [l.split() for l in open(f'{d}/ar-{r}.txt')] for r in (0, 1)}
n = min(len(shim[0]), len(shim[1]))


def mpi_last(i):
    e = [float(shim[r][i][1]) for r in (0, 1)]
    x = [float(shim[r][i][2]) for r in (0, 1)]
    k = 0 if e[0] > e[1] else 1
    return x[k] - e[k]


if not os.path.exists(f'{d}/m.jsonl'):
    print('bench-comm mpi %.0f' % st.median(mpi_last(i) for i in range(n)))
    sys.exit(0)
recs = [json.loads(l) for l in open(f'{d}/m.jsonl')]
steps = [x for x in recs if x.get('type') == 'step' and x['step'] > 10]
last = st.median(x['comm_last_ms'] for x in steps if x['comm_last_ms'] > 0)
late = []
for r in (0, 1):
    ev = json.load(open(f'{d}/trace/rank-{r}.json'))
    ev = ev['traceEvents'] if isinstance(ev, dict) else ev
    spans = [e for e in ev if e.get('name', '').startswith('allreduce of gradient bucket')]
    lag = [float(shim[r][i][1]) - spans[i]['ts'] for i in range(10, min(len(spans), n))]
    late.append(sum(1 for x in lag if x - min(lag) > 300) / len(lag))
print('%-7s comm_last %5.0f  mpi %5.0f  step %.2f ms  late %.0f%%/%.0f%%' %
      (label, 1e3 * last, st.median(mpi_last(i) for i in range(10, n)),
       st.median(x['step_ms'] for x in steps), 100 * late[0], 100 * late[1]))
