"""Compile one regular expression read from stdin; print "ok", or the compiler's message on one line.

Run by engine.training.methods.reward_spec through engine.store.limits (a memory and CPU cap), never imported: a nested
pattern such as ``((a{100}){100}){100}`` costs seconds and hundreds of MB to compile.
"""

import sys

import regex

try:
    regex.compile(sys.stdin.read())
except regex.error as exc:
    print(str(exc).splitlines()[0] if str(exc) else "invalid pattern")
else:
    print("ok")
