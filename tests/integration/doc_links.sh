#!/usr/bin/env bash
# The documentation's links resolve: every relative link in README.md, docs/*.md and the other
# READMEs names a file of the repository, and every #anchor a heading of its page (GitHub's
# rule: lower case, punctuation dropped, spaces as hyphens), so that moving text between pages
# (issue 47) loses no reference. A broken link is printed with its page.
source "$(dirname "$0")/common.bash"
cd "$MPDIST_SRC"
python3 - README.md docs/*.md configs/README.md cluster/README.md tests/gpu/README.md \
  bench/results/*.md <<'PY' || failures=$((failures + 1))
import os, re, sys
def anchor(text):
    return re.sub(r'[^\w\- ]', '', text.strip().lower()).replace(' ', '-')
def anchors(path):
    with open(path) as f:
        return {anchor(l.split(' ', 1)[1]) for l in f if re.match(r'^#+ ', l)}
bad = links = 0
for page in sys.argv[1:]:
    text = re.sub(r'```.*?```', '', open(page).read(), flags=re.S)
    for m in re.finditer(r'\]\(([^)\s]+)\)', text):
        target = m.group(1)
        if re.match(r'^(https?:|mailto:)', target):
            continue
        links += 1
        path, _, frag = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(dest):
            print(f"FAIL: {page}: {target}: no such file"); bad += 1
        elif frag and dest.endswith('.md') and frag not in anchors(dest):
            print(f"FAIL: {page}: {target}: no heading #{frag} in {dest}"); bad += 1
print(f"{links} links checked, {bad} broken")
sys.exit(bad != 0)
PY
finish
