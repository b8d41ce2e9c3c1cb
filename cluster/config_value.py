#!/usr/bin/env python3
"""A number an mpdist run was given: its config file's setting as the run's --set overrode it.

The cluster scripts model runs they launched (cluster/scaling.sh: scaling_model.py, and
scaling_box.py for --box) and need the settings those runs trained with, such as
comm.bucket_mb: the last `--set KEY=VALUE` for the key wins, as in mpdist; else the file's
setting outside comments and strings; else the default.
"""
import re


def uncommented(text):
    """libconfig text without its comments (#, // and /* */ up to the line's or comment's end)
    and with its strings emptied, so that neither can hold a setting."""
    return re.sub(r'"(?:[^"\\]|\\.)*"|(?:#|//)[^\n]*|/\*.*?(?:\*/|\Z)',
                  lambda m: '""' if m.group(0).startswith('"') else " ", text, flags=re.S)


def number(config, sets, key, default):
    """key ("comm.bucket_mb") as a float: the last of sets (KEY=VALUE strings) that sets it, else
    the config file's setting of its last name (not one ending in it: bucket_mb is not
    first_bucket_mb), else default. A value that is no number: SystemExit, saying which."""
    name = key.rsplit(".", 1)[-1]
    given = [s.split("=", 1)[1] for s in sets if s.split("=", 1)[0].strip() == key and "=" in s]
    if given:  # as mpdist reads it: a file line's ';' or ',' and comment may end it
        value = re.sub(r"\s*(#|//).*$|\s*/\*.*?\*/\s*$", "", given[-1].strip())
        value, where = value.rstrip(" \t;,"), f"--set {key}"
    else:
        m = re.search(rf"(?<![\w.]){name}\s*[=:]\s*([^;,\s}}]+)", uncommented(open(config).read()))
        if not m:
            return default
        value, where = m.group(1), f"{config}: {name}"
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return float(int(value.rstrip("Ll"), 0))  # libconfig's integers: 0x10, 5000000000L
    except ValueError:
        raise SystemExit(f"scaling: {where} is not a number (got '{value}')") from None


if __name__ == "__main__":  # a module of scaling_model.py and scaling_box.py: its description
    print(__doc__.strip())
